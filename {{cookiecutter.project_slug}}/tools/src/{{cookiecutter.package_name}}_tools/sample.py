"""Sample events for the demo, the tests and the chaos runner, with the events the configured
filter keeps, evaluated apart from the job: what the query's model computes the expected output from."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka import Producer

from {{ cookiecutter.package_name }}.failures import ConfigError
from {{ cookiecutter.package_name }}.kafka.client import librdkafka_config
from {{ cookiecutter.package_name }}.pipeline.parsing import SPARK_TYPES as _SPARK_TYPES

from .kafka_io import produce as produce_one
from .value_formats import JSON, Values, input_values

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from {{ cookiecutter.package_name }}.config import JobConfig

# The string keys a sample draws from: values of the key field's own kind.
{%- if cookiecutter.key_field == "color" %}
SAMPLE_KEYS = ["red", "green", "blue", "orange", "yellow", "purple", "black", "white"]
{%- else %}
SAMPLE_KEYS = [f"{{ cookiecutter.key_field }}-{n}" for n in range(1, 9)]
{%- endif %}


def malformed_values(key_field: str) -> list[bytes]:
    """Records the job must turn into dead letters, whatever the schema: not JSON, not an
    object, no key, a key of no schema type, invalid text, trailing content, deep nesting."""
    key = json.dumps(key_field).encode()
    return [
        b"{not json", b"[1, 2, 3]", b'{"' + b"not_" + key[1:] + b": 3}", b"{" + key + b': {"nested": 1}}',
        b"\xff\xfe", b"",
        b"{" + key + b': "\\ud800"}',  # a lone surrogate escape
        b"{" + key + b': "\xed\xa0\x80"}',  # a surrogate's raw bytes: invalid UTF-8
        b"[" * 1000,  # deep nesting, never closed
        b"{" + key + b': "red"} trailing',
        b"{" + key + b': "red", "n": 1} {' + key + b': "blue"}x',
        b"{" + key + b': "red"} {' + key + b': "blue"}',  # a second object: the parser stops after the first
    ]


Event = dict[str, object]
# Which of these events the job's filter keeps, one flag per event.
Keep = Callable[[list[Event]], list[bool]]
# Key values per key type; a sample also uses every literal of the filter that fits the type.
_KEYS: dict[str, list[object]] = {"string": list(SAMPLE_KEYS), "int": list(range(1, 9)),
                                  "float": [0.5, 1.5, 2.5, 4.0], "bool": [True, False]}


@dataclass
class SampleInput:
    values: list[bytes] = field(default_factory=list)
    kept_events: list[Event] = field(default_factory=list)  # the good events the filter keeps, in order
    malformed_values: list[bytes] = field(default_factory=list)
    counted_values: set[bytes] = field(default_factory=set)  # the good events the filter keeps

    @property
    def malformed(self) -> int:
        return len(self.malformed_values)


def sample_keys(key_type: str, filter_expression: str) -> list[object]:
    """The key values a sample draws from: a fixed set, plus the filter's literals of the key's
    type, so that a typical filter (`color != 'orange'`, `kind NOT IN ('test')`) has events on
    both of its sides."""
    keys = list(_KEYS[key_type])
    if key_type == "string":
        literals: list[object] = [m.replace("''", "'") for m in re.findall(r"'((?:[^']|'')*)'", filter_expression)]
    elif key_type == "int":
        literals = [int(m) for m in re.findall(r"(?<![\w.])(-?[0-9]+)(?![\w.])", filter_expression)]
    else:
        literals = []
    return keys + [value for value in dict.fromkeys(literals) if value not in keys]

{%- if cookiecutter.query == "windowed-count" %}

# Where a sample's event times begin (2026-01-01T00:00:00Z, epoch milliseconds).
EVENT_TIME_BASE_MS = 1_767_225_600_000


@dataclass(frozen=True)
class EventTimes:
    """A sample's event times: `field` drawn within `span_ms` after EVENT_TIME_BASE_MS. A span below
    the query's allowed lateness makes no event late, however the input is cut into batches."""

    field: str
    span_ms: int

    def draw(self, rng: random.Random) -> int:
        return EVENT_TIME_BASE_MS + rng.randrange(self.span_ms + 1)
{%- endif %}


def make_events(count: int, seed: int, schema: Mapping[str, str], key_field: str, keep: Keep,
                malformed_rate: float = 0.0, keys: Sequence[object] | None = None{% if cookiecutter.query == "windowed-count" %},
                event_times: EventTimes | None = None{% endif %},
                values: Values = JSON) -> SampleInput:
    """`count` events of the schema, keys skewed (the first keys are far more frequent), a share
    of malformed records, written in the input's format (`values`). The kept events are those that
    `keep` (the job's filter, evaluated apart from the job: `spark_filter`) lets through."""
    rng = random.Random(seed)
    keys = keys or list(_KEYS[schema[key_field]])
    weights = [1.0 / (rank + 1) for rank in range(len(keys))]
    sample = SampleInput()
    malformed = values.malformed(key_field) if malformed_rate else []
    events: list[tuple[Event, bytes]] = []
    for i in range(count):
        if malformed_rate and rng.random() < malformed_rate:
            sample.values.append(malformed[i % len(malformed)])
            sample.malformed_values.append(malformed[i % len(malformed)])
            continue
        event = _other_fields(rng, schema, key_field)
        event[key_field] = rng.choices(keys, weights)[0]
{%- if cookiecutter.query == "windowed-count" %}
        if event_times is not None:
            event[event_times.field] = event_times.draw(rng)
{%- endif %}
        event.setdefault("seq", i)  # not in the schema unless a team adds it: the job ignores it
        value = values.event_value(event)
        sample.values.append(value)
        events.append((event, value))
    for (event, value), kept in zip(events, keep([event for event, _ in events]), strict=True):
        if kept:
            sample.kept_events.append(event)
            sample.counted_values.add(value)
    return sample


def events_of_keys(keys: Sequence[object], seed: int, schema: Mapping[str, str], key_field: str{% if cookiecutter.query == "windowed-count" %},
                   event_times: EventTimes | None = None{% endif %}) -> list[Event]:
    """An event per key, in order, its other fields as make_events gives them."""
    rng = random.Random(seed)
    events = [{**_other_fields(rng, schema, key_field), key_field: key} for key in keys]
{%- if cookiecutter.query == "windowed-count" %}
    if event_times is not None:
        for event in events:
            event[event_times.field] = event_times.draw(rng)
{%- endif %}
    return events


def configured_sample(config: JobConfig, keep: Keep, count: int, seed: int, malformed_rate: float = 0.0,
                      values: Values | None = None) -> SampleInput:
    """A sample for the job as configured: its schema, its key field, keys on both sides of its
    filter, in its input's format (or `values`)."""
    keys = sample_keys(config.schema[config.key_field], config.filter)
    return make_events(count, seed, config.schema, config.key_field, keep, malformed_rate, keys
                       {%- if cookiecutter.query == "windowed-count" %}, event_times(config){% endif %},
                       values=values or input_values(config))
{%- if cookiecutter.query == "windowed-count" %}


def event_times(config: JobConfig) -> EventTimes:
    """The query's event times: within its allowed lateness, so none is late."""
    return EventTimes(config.event_time_field, max(config.allowed_lateness_seconds * 1000 - 1, 0))
{%- endif %}


def keep_all(events: list[Event]) -> list[bool]:
    return [True] * len(events)


def spark_filter(spark: SparkSession, filter_expression: str, schema: Mapping[str, str]) -> Keep:
    """The job's filter as a `Keep`, evaluated by Spark SQL in a batch query on the events'
    typed fields: the filter's own semantics, none of the job's streaming pipeline."""

    def keep(events: list[Event]) -> list[bool]:
        if not events:
            return []
        columns = ", ".join(f"`{name}` {_SPARK_TYPES[kind]}" for name, kind in schema.items())
        rows = [(i, *(event.get(name) for name in schema)) for i, event in enumerate(events)]
        frame = spark.createDataFrame(rows, f"`_position` BIGINT, {columns}")
        kept = {row[0] for row in frame.where(filter_expression).select("_position").collect()}
        return [i in kept for i in range(len(events))]

    return keep


def _other_fields(rng: random.Random, schema: Mapping[str, str], key_field: str) -> Event:
    return {name: _value(rng, kind) for name, kind in schema.items() if name != key_field}


def _value(rng: random.Random, kind: str) -> object:
    """A field that is not the key: a small range of values, so that filters on it select some."""
    if kind == "string":
        return rng.choice(["a", "b", "c"])
    if kind == "int":
        return rng.randint(0, 9)
    if kind == "float":
        return round(rng.uniform(0, 10), 2)
    return rng.random() < 0.5


def sample_headers(position: int) -> list[tuple[str, bytes | None]] | None:
    """The headers of a sample's record at `position`: none on every fourth; otherwise its position,
    and on every third also a header without a value and one whose value is not text. A query that
    keeps its input's headers (query.KEEPS_HEADERS) is held to all three by the differential oracle."""
    if position % 4 == 3:
        return None
    headers: list[tuple[str, bytes | None]] = [("sample-position", str(position).encode())]
    if position % 3 == 0:
        headers += [("sample-empty", None), ("sample-bytes", bytes([position % 256, 0xFF]))]
    return headers


def produce(bootstrap_servers: str, topic: str, values: list[bytes], partitions: int | None = None,
            client: Mapping[str, str] | None = None) -> None:
    """Produce every value (round-robin over partitions when given), with sample_headers, and wait
    for delivery."""
    producer = Producer(librdkafka_config(bootstrap_servers, client, {"enable.idempotence": True, "linger.ms": 10}))
    failures: list[str] = []
    for i, value in enumerate(values):
        produce_one(producer, topic, value, partition=i % partitions if partitions else None,
                    on_delivery=lambda e, _m: failures.append(str(e)) if e else None, headers=sample_headers(i))
    undelivered = producer.flush(60)
    if undelivered or failures:
        raise ConfigError("bootstrap_servers", f"{undelivered or len(failures)} of {len(values)} events were not "
                                               f"delivered to {topic!r} at {bootstrap_servers} "
                                               f"({'; '.join(failures[:2]) or 'no answer within 60s'})")
