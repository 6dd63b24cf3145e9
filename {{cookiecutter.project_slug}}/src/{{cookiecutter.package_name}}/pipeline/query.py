"""The job's query, the one module a team edits to change what the job computes: from parsed
events (parsing.py, fields as `[schema]` in job.toml declares them) to what the sink publishes.
{%- if cookiecutter.query == "windowed-count" %}
Filter, then a count per key and event-time window (windowed_counting.py: tumbling windows of
`window_seconds` on `event_time_field`, late events to the dead-letter topic). Six things here
describe it, and change together:
- `keep`: which events the job keeps (the `filter` option);
{%- elif cookiecutter.query == "stateless" %}
Filter, then one output record per kept event. Seven things here describe it, and change together:
- `keep`: which events the job keeps (the `filter` option);
- `project`: an output record's fields, as Spark columns over a kept event (the default: every
  field of `[schema]`); the sink, the runner and the tests do not change with it;
{%- else %}
Filter, then an answer per key. Seven things here describe it, and change together:
- `keep`: which events the job keeps (the `filter` option);
- `answer`: what the job publishes for a key, as aggregates over its kept events (the default:
  how many there were); the sink, the runner, savepoints, the state TTL and the tests do not
  change with it;
{%- endif %}
- `route`: the route each output record takes, a name of `[routes]`, which maps it to a topic
  (the `route` option; by default none: every record to `output_topic`);
- `OUTPUT`: what its published records mean, as the tests' differential oracle compares them
  (tools' differential.py): "upsert", one record per key and batch, a key's latest record its
  answer; or "append", every record an answer of its own;
- `KEEPS_STATE`: whether a batch's answers depend on the batches before it (Spark's state). A
  checkpoint of a query with state pins what the query computes (fingerprint.py);
- `KEEPS_HEADERS`: whether output records carry the headers of the input record each came
  from (Spark's Kafka source reads headers only then); the sink adds its `batch_id` header last;
- `model`: the same query in plain Python, one event at a time, which the tests hold the job's
  output to, batch by batch (tools' verify.py), and which tells a checkpoint's query from another
  (fingerprint.py).
{%- if cookiecutter.query == "windowed-count" %}
What is around them is the pipeline's (steps.py: dead letters pass the filter to reach their
topic, the shape's operator, the sink's columns), not the team's.
The README's "Change the job" walks through changing what a window holds.
{%- elif cookiecutter.query == "stateless" %}
What is around them is the pipeline's (steps.py: dead letters pass the filter to reach their
topic, the shape's operator, the sink's columns), not the team's.
The README's "Change the job" walks through changing what a record carries.
{%- else %}
What is around them is the pipeline's (steps.py: dead letters pass the filter to reach their
topic, the columns the operator reads, the operator, the sink's columns), not the team's.
The README's "Change the job" walks through turning the count into a sum.
{%- endif %}
"""

from __future__ import annotations

import json
{%- if cookiecutter.query != "stateless" %}
from collections import Counter
{%- endif %}
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from pyspark.sql import Column
from pyspark.sql import functions as F

from ..config import JobConfig
{%- if cookiecutter.query == "count-by-key" %}
from . import aggregates as agg
{%- endif %}
{%- if cookiecutter.query == "windowed-count" %}
from .windowed_counting import iso_time, window_key, window_start
{%- endif %}

OutputKind = Literal["upsert", "append"]
{%- if cookiecutter.query == "stateless" %}
OUTPUT: OutputKind = "append"
KEEPS_STATE = False
KEEPS_HEADERS = True  # each output record is one input record's
{%- else %}
OUTPUT: OutputKind = "upsert"
KEEPS_STATE = True
KEEPS_HEADERS = False  # an answer per key has no one input record
{%- endif %}


def keep(config: JobConfig) -> Column:
    """Which events the job keeps: a condition over an event's fields (the `filter` option, a
    Spark SQL expression). Dead letters reach their topic whatever it says (steps.py)."""
    return F.expr(config.filter)
{%- if cookiecutter.query == "stateless" %}


def project(config: JobConfig) -> list[Column]:
    """An output record's fields, each named: its value is `{"key": <key>, <name>: <value>, ...}`,
    null fields left out (as Spark's `to_json` writes them). Evaluated over dead letters' rows too,
    whose fields are null."""
    return [F.col(f"`{name}`").alias(name) for name in config.schema]
{%- elif cookiecutter.query == "count-by-key" %}


def answer(config: JobConfig) -> list[agg.Aggregate]:
    """A key's answer: aggregates over the key's kept events, each named (aggregates.py: Count,
    Sum, Min, Max, Mean, whose state merges, so that a savepoint and a state TTL keep it). The
    output record's value is `{"key": <key>, <name>: <value>, ...}`."""
    return [agg.Count("count")]
{%- endif %}


def route(config: JobConfig) -> Column | None:
    """The route an output record takes: a Spark column over its fields (`key` and the answer's
    names) giving a name of `[routes]`, the table that maps each route to its topic (so that the
    query names destinations and each deployment its topics); a record whose route is not there is
    a dead letter (output_records.py). None: every record to `output_topic`. The `route` option, a
    Spark SQL expression, which the tests evaluate apart from the job, as they do the filter."""
    return F.expr(config.route) if config.route else None


Event = Mapping[str, Any]  # a parsed event: its fields as JSON gives them, of `[schema]`'s types
Answer = dict[str, object]  # an output record's value, without the batch id the sink adds


def model(events: Iterable[Event], config: JobConfig) -> Iterator[tuple[str, Answer]]:
{%- if cookiecutter.query == "windowed-count" %}
    """The query in plain Python: for each event the filter keeps (the tests evaluate the filter
    with Spark SQL, apart from the job), in input order, the key and window whose count it
    changes and the new count. It knows no watermark: late events depend on where the batches
    begin and end, so the tests' samples keep every event time within `allowed_lateness_seconds`
    of every other (none is late however the input is cut into batches), and late events have a
    test of their own (tests/integration/test_late_events.py)."""
    window_ms = config.window_seconds * 1000
    counts: Counter[tuple[str, int]] = Counter()
    for event in events:
        key = as_key(event[config.key_field])
        start = window_start(int(event[config.event_time_field]), window_ms)
        counts[key, start] += 1
        yield window_key(key, start), {"key": window_key(key, start), "window_start": iso_time(start),
                                       "window_end": iso_time(start + window_ms), "count": counts[key, start]}
{%- elif cookiecutter.query == "stateless" %}
    """The query in plain Python: for each event the filter keeps (the tests evaluate the filter
    with Spark SQL, apart from the job), in input order, its key and the record published for it."""
    for event in events:
        key = as_key(event[config.key_field])
        yield key, {"key": key, **{name: event[name] for name in config.schema if event.get(name) is not None}}
{%- else %}
    """The query in plain Python: for each event the filter keeps (the tests evaluate the filter
    with Spark SQL, apart from the job), in input order, the key whose answer it changes and the
    new answer. What a key's answer is after a batch must not depend on the order of the batch's
    events (a batch reads its partitions in parallel)."""
    counts: Counter[str] = Counter()
    for event in events:
        key = as_key(event[config.key_field])
        counts[key] += 1
        yield key, {"key": key, "count": counts[key]}
{%- endif %}


def as_key(value: object) -> str:
    """A field as the output key holds it: Spark's cast to string."""
    return json.dumps(value) if isinstance(value, bool) else str(value)
