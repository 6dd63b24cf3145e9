"""The rules for the names the job hands to Kafka, the checkpoint and the metrics. The template's
pre-generation hook loads this very file by path to check the answers, and `config` checks the
options with it, so a project is never generated with a name its own job refuses. Standard
library only, and no template markers: the file is the same in the template and in the project.

Each rule returns what a value breaks, as text that follows `<value!r>: `, or None when it is good.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
SINK_ID = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]*")
SINK_ID_MAX_LENGTH = 100
TRANSACTIONAL_ID_PREFIX_MAX_LENGTH = 200
# The columns the parse adds beside the event's fields: a field of the same name would be hidden.
PARSE_COLUMNS = ("is_event", "dead_letter_reason", "topic", "partition", "offset", "raw_value")


def parse_column_problem(name: str) -> str | None:
    """An event field (the key field among them) named like a column the parse adds."""
    if name in PARSE_COLUMNS:
        return f"the parse adds a column of that name ({', '.join(PARSE_COLUMNS)}); rename the field"
    return None


def topic_problem(name: str) -> str | None:
    """Kafka's own rule for topic names (Topic.validate in its clients and broker), checked before
    anything starts rather than when the job first creates or writes to the topic."""
    if not TOPIC.fullmatch(name) or name in (".", ".."):
        return "must be a Kafka topic name: 1 to 249 of a-z A-Z 0-9 . _ -, and not '.' or '..'"
    return None


def topic_collisions(topics: Mapping[str, str]) -> dict[str, str]:
    """What each topic, by option, breaks by colliding with an earlier one: the job's topics must
    differ, and Kafka refuses a topic whose name differs from an existing one's only in '.' versus
    '_', because their metric names would be the same."""
    found: dict[str, str] = {}
    first: dict[str, tuple[str, str]] = {}  # collision key: (option, name) of its first topic
    for option, name in topics.items():
        key = name.replace(".", "_")
        if key not in first:
            first[key] = (option, name)
        elif first[key][1] == name:
            found[option] = f"must differ from {first[key][0]}"
        else:
            found[option] = f"must differ from {first[key][0]} (Kafka treats '.' and '_' in topic names as the same)"
    return found


def sink_id_problem(value: str) -> str | None:
    """The sink id is a directory under the checkpoint (`sinks/<sink_id>/log`), the prefix of the
    sink's marker keys (`<sink_id>/<shard>`), part of its transactional ids, a Prometheus label and
    the Spark query's name. A '/' would nest directories and let one sink read another's markers
    (`a/` is a prefix of `a/b/0`); a space breaks paths and labels; a leading '.' could make `..`.
    The length leaves room for a savepoint generation's `.g<N>` suffix."""
    if not value:
        return "must not be empty"
    if len(value) > SINK_ID_MAX_LENGTH:
        return f"must be at most {SINK_ID_MAX_LENGTH} characters, not {len(value)}"
    if not SINK_ID.fullmatch(value):
        return "must be a-z A-Z 0-9 . _ -, starting with a letter or digit (no '/', no spaces)"
    return None


def transactional_id_prefix_problem(value: str) -> str | None:
    """The prefix starts every transactional id, `<prefix>-<sink_id>-<shard>`, which is what a
    prefixed transactional-id ACL on the broker matches. Kafka itself takes any string; keeping
    it one printable ASCII token without quotes or backslashes keeps it intact in job files, shell
    scripts and ACL commands. The length leaves room for the sink id and shard."""
    if not value:
        return "must not be empty"
    if len(value) > TRANSACTIONAL_ID_PREFIX_MAX_LENGTH:
        return f"must be at most {TRANSACTIONAL_ID_PREFIX_MAX_LENGTH} characters, not {len(value)}"
    if any(not ("!" <= ch <= "~") or ch in "\"'\\" for ch in value):
        return "must be printable ASCII without whitespace, quotes or backslashes"
    return None
