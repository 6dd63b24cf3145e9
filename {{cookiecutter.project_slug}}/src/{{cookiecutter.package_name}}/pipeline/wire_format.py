"""The schema registry's wire format, as the JVM reads it for every format under a registry
(avro_parsing.py, protobuf_parsing.py): a magic byte 0, the schema id in 4 bytes (big-endian),
then the body; the header's checks, the first a record meets; the schema ids of the batch a start
runs again, for the plan to judge."""

from __future__ import annotations

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from ..config import JobConfig
from ..storage import checkpoint
from ..storage.files import resolve_location
from .input_range import read_input_range
{%- if cookiecutter.query == "windowed-count" %}
from .parsing import MAX_EVENT_TIME_MS, SPARK_TYPES, Check, EventSchema
{%- else %}
from .parsing import Check, EventSchema
{%- endif %}

HEADER_BYTES = 5  # the magic byte and the 4-byte schema id


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
