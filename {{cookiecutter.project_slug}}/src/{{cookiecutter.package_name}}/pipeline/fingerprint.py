"""What the query computes, as a short digest: the answers its model (query.model) gives for a
fixed set of probe events of the configured schema.

A checkpoint's state holds the query's running answers (by default a count per key). Resume it with a query
that computes something else (a sum where a count was, another key field) and the new query goes
on from the old answers: amounts added onto counts, and Spark cannot tell, since both are BIGINT.
The digest changes when what the query computes changes, not when its code is reformatted or its
operator swapped (a state TTL); the filter is not in it (a new filter applies from the next batch
on). A checkpoint pins it (savepoints/pinned_query.py), and so does a savepoint's manifest.

The model is the query's own description: the tests hold the job's output to it, so a query
changed without its model fails `make test` before it reaches a checkpoint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

from ..config import JobConfig
from ..failures import ConfigError
from . import query

PROBES = 64
_VALUES: dict[str, list[object]] = {
    "string": ["a", "b", "c", "d", "e"],
    "int": [0, 1, 2, 3, 5, 8, 13],
    "float": [0.0, 0.5, 1.25, 2.5, 10.0],
    "bool": [True, False],
}


def probe_events(config: JobConfig) -> list[dict[str, object]]:
    """PROBES events of the configured schema, every field varying on its own period (no randomness)."""
    events = []
    for i in range(PROBES):
        events.append({name: _VALUES[kind][(i * (position + 1) + position) % len(_VALUES[kind])]
                       for position, (name, kind) in enumerate(sorted(config.schema.items()))})
    return events


Model = Callable[[Iterable[query.Event], JobConfig], Iterable[tuple[str, query.Answer]]]


def fingerprint(config: JobConfig, model: Model | None = None) -> str:
    """A digest of the model's answers (by default query.model's), one after each probe event. A
    model that fails on events of the configured schema (a field the query reads that `[schema]`
    lacks) stops the start."""
    try:
        return _digest((model or query.model)(probe_events(config), config))
    except Exception as error:  # noqa: BLE001 - a team's code: whatever it raises, one line naming the option
        raise ConfigError("schema", f"pipeline/query.py's model fails on events of the configured schema "
                          f"({type(error).__name__}: {error}): does [schema] declare every field the query "
                          "reads?") from None


def _digest(answers: Iterable[tuple[str, query.Answer]]) -> str:
    return hashlib.sha256(json.dumps(list(answers), sort_keys=True, default=str).encode()).hexdigest()[:16]
