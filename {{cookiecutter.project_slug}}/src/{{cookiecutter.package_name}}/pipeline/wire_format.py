"""The schema registry's wire format, as the JVM reads it for every format under a registry
(avro_parsing.py, protobuf_parsing.py): a magic byte 0, the schema id in 4 bytes (big-endian),
then the body; each body decoded by its writer schema's decoder, one branch per id; the header's
checks, the first a record meets; the schema ids of the batch a start runs again, for the plan to
judge.

An id the query's plan has no schema for fails the batch, nothing of it published, with a message
that has the job build the query again (failures.Outcome.REBUILD): the new plan asks the registry
for the subject's versions again and judges every id of the batch it re-runs (an id of another
subject or none is a dead letter from then on). A producer that moves to a new version of the
subject in the middle of a run costs one rebuild; the registry registers an id before any record
carries it, so a batch planned after that holds nothing the rebuild cannot read."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..config import JobConfig
from ..failures import REBUILD_MARK
from ..storage import checkpoint
from ..storage.files import resolve_location
from .input_range import read_input_range
{%- if cookiecutter.query == "windowed-count" %}
from .parsing import HEADERS, MAX_EVENT_TIME_MS, SPARK_TYPES, Check, EventSchema, checked_events
{%- else %}
from .parsing import HEADERS, SPARK_TYPES, Check, EventSchema, checked_events
{%- endif %}

HEADER_BYTES = 5  # the magic byte and the 4-byte schema id
Decoder = Callable[[Column], Column]  # a body's bytes to its decoded record


class RegistryPlan(Protocol):
    """What the parse needs of a format's plan (formats/avro_input.py, formats/protobuf_input.py)."""

    @property
    def subject(self) -> str: ...  # the input's subject

    @property
    def foreign(self) -> dict[int, str]: ...  # the ids judged unreadable, each with its dead letters' reason


def parse_wire_format(records: DataFrame, schema: EventSchema, plan: RegistryPlan, decoders: Mapping[int, Decoder],
                      fields_of: Callable[[Column], dict[str, Column]],
                      undecoded: Callable[[Column, Column], Check]) -> DataFrame:
    """Kafka records to parsed events or dead letters with a reason: the columns of
    parsing.parse_records. `decoders`: each writer schema id's; `fields_of`: `[schema]`'s fields
    of a decoded record; `undecoded`: (a decoded record, its id's bytes) to the check of a body that
    did not decode and its reason."""
    headers = [HEADERS] if HEADERS in records.columns else []
    value, size = F.col("value"), F.octet_length(F.col("value"))
    is_wire, id_bytes, body = header(value)
    staged = records.select("value", "topic", "partition", "offset", *headers, is_wire.alias("_is_wire"),
                            id_bytes.alias("_id_bytes"), body.alias("_body"))
    ids = F.col("_id_bytes")
    decoded = F.when(~F.col("_is_wire") | (size > schema.max_record_bytes), F.lit(None))
    for writer_id, decode in decoders.items():
        decoded = decoded.when(ids == id_literal(writer_id), decode(F.col("_body")))
    if plan.foreign:
        decoded = decoded.when(ids.isin([id_literal(foreign_id) for foreign_id in plan.foreign]), F.lit(None))
    decoded = decoded.otherwise(F.raise_error(F.format_string(
        f"{REBUILD_MARK}schema id %d is new to the query (a new version of subject {plan.subject!r}?)",
        schema_id(ids))))
    with_record = staged.select("*", decoded.alias("_record"))
    record = F.col("_record")
    fields = fields_of(record)
    checks = [*header_checks(value, size, ids, schema, plan.foreign), undecoded(record, ids),
              *field_checks(fields, schema)]
    typed = {name: fields[name].cast(SPARK_TYPES[kind]) for name, kind in schema.fields.items()}
    return checked_events(with_record, typed, checks, schema, headers)


def ids_of_the_pending_batch(spark: SparkSession, config: JobConfig) -> set[int]:
    """The schema ids in the input of the batch the checkpoint planned and did not commit (the one
    a start runs again), so that the plan judges them all; none for a checkpoint without one."""
    location = resolve_location(config.checkpoint_location)
    planned, committed = checkpoint.planned_batches(location), checkpoint.committed_batches(location)
    if not planned or (committed and committed[-1] >= planned[-1]):
        return set()
    start, end = checkpoint.batch_range(location, planned[-1], config.input_topic)
    records = read_input_range(spark, config, start, end)
    is_wire, id_bytes, _ = header(F.col("value"))
    return {row[0] for row in records.where(is_wire).select(schema_id(id_bytes)).distinct().collect()}


def header(value: Column) -> tuple[Column, Column, Column]:
    """(whether a value has the wire format's header, its schema id's 4 bytes, its body). The id
    stays bytes, compared with each known id's bytes: turned into a number for every record (hex,
    then base 16 to 10) it took most of the parse's time."""
    is_wire = (F.octet_length(value) >= HEADER_BYTES) & (F.substring(value, 1, 1) == F.lit(b"\x00"))
    id_bytes = F.when(is_wire, F.substring(value, 2, 4))
    body = F.when(is_wire, F.substring(value, HEADER_BYTES + 1, 2147483647))
    return is_wire, id_bytes, body


def header_checks(value: Column, size: Column, ids: Column, schema: EventSchema,
                  foreign: dict[int, str]) -> list[Check]:
    """A record's checks up to its body, in order: a value, its size, the header, an id the plan
    judged unreadable (`foreign`: each id's reason). `ids`: each record's schema id as its 4 bytes."""
    checks = [
        (value.isNull(), F.lit("empty value (null)")),
        (size > schema.max_record_bytes,
         F.format_string(f"oversized: %d bytes > max_record_bytes {schema.max_record_bytes}", size)),
        (size < HEADER_BYTES, F.format_string(f"not in the registry's wire format: %d bytes, shorter than its "
                                              f"{HEADER_BYTES}-byte header", size)),
        (F.substring(value, 1, 1) != F.lit(b"\x00"),
         F.concat(F.lit("not in the registry's wire format: magic byte 0x"), F.hex(F.substring(value, 1, 1)),
                  F.lit(", not 0x00"))),
    ]
    if foreign:
        (first_id, first_text), *others = foreign.items()
        reason = F.when(ids == id_literal(first_id), F.lit(first_text))
        for foreign_id, text in others:
            reason = reason.when(ids == id_literal(foreign_id), F.lit(text))
        checks.append((ids.isin([id_literal(foreign_id) for foreign_id in foreign]), reason))
    return checks


def field_checks(fields: dict[str, Column], schema: EventSchema) -> list[Check]:
    """A decoded record's checks of `[schema]`'s fields (`fields`: each as the record has it)."""
    checks: list[Check] = []
{%- if cookiecutter.query == "windowed-count" %}
    for name, kind in schema.fields.items():
{%- else %}
    for name in schema.fields:
{%- endif %}
        if name == schema.key_field:
            checks.append((fields[name].isNull(), F.lit(f"missing key field {name!r}")))
{%- if cookiecutter.query == "windowed-count" %}
        elif name == schema.event_time_field:
            checks.append((fields[name].isNull(), F.lit(f"missing event-time field {name!r}")))
        if name == schema.event_time_field:
            time = fields[name].cast(SPARK_TYPES[kind])
            checks.append((~time.between(0, MAX_EVENT_TIME_MS), F.format_string(
                f"event-time field {name!r} is %d, outside 0 to {MAX_EVENT_TIME_MS} (epoch milliseconds)", time)))
{%- endif %}
    return checks


def schema_id(id_bytes: Column) -> Column:
    """A schema id's 4 bytes (big-endian) as its number, for the texts that name it."""
    return F.conv(F.hex(id_bytes), 16, 10).cast("bigint")


def id_literal(schema_id: int) -> Column:
    """A schema id as the wire format writes it: 4 bytes, big-endian."""
    return F.lit(schema_id.to_bytes(4, "big"))
