"""Avro input in the registry's wire format, decoded in the JVM into the columns the JSON parse
gives (parsing.py): the header checked, each record's body read by spark-avro's
`from_avro` with its own writer schema (one branch per version of the input's subject) and resolved
into the reader schema, the subject's latest version; `[schema]`'s fields taken from it. What does
not decode is a dead letter with its reason, its raw bytes kept.

An id the query's plan has no schema for fails the batch, nothing of it published, with a
message that has the job build the query again (failures.Outcome.REBUILD): the new plan
(formats/avro_input.py) asks the registry for the subject's versions again and judges every id
of the batch it re-runs (an id of another subject or none is a dead letter from then on). A
producer that moves to a new version of the subject in the middle of a run costs one rebuild; the
registry registers an id before any record carries it, so a batch planned after that holds
nothing the rebuild cannot read.

Limits: trailing bytes after a body are not noticed (Avro's binary encoding has no end marker);
a body written with another schema that happens to decode with its id's is read as that."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..config import JobConfig
from ..failures import REBUILD_MARK
from ..formats.avro_input import DECODED, AvroInput
from ..storage import checkpoint
from ..storage.files import resolve_location
from .input_range import read_input_range
{%- if cookiecutter.query == "windowed-count" %}
from .parsing import HEADERS, MAX_EVENT_TIME_MS, SPARK_TYPES, Check, EventSchema, checked_events
{%- else %}
from .parsing import HEADERS, SPARK_TYPES, Check, EventSchema, checked_events
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
    is_wire, id_bytes, _ = _header(F.col("value"))
    return {row[0] for row in records.where(is_wire).select(schema_id(id_bytes)).distinct().collect()}


def parse_avro(records: DataFrame, schema: EventSchema, plan: AvroInput) -> DataFrame:
    """Kafka records to parsed events or dead letters with a reason: the columns of parsing.parse_records."""
    from pyspark.sql.avro.functions import from_avro

    headers = [HEADERS] if HEADERS in records.columns else []
    value, size = F.col("value"), F.octet_length(F.col("value"))
    is_wire, id_bytes, body = _header(value)
    staged = records.select("value", "topic", "partition", "offset", *headers, is_wire.alias("_is_wire"),
                            id_bytes.alias("_id_bytes"), body.alias("_body"))
    wire, ids = F.col("_is_wire"), F.col("_id_bytes")
    options = {"avroSchema": plan.reader, "mode": "PERMISSIVE"}
    decoded = F.when(~wire | (size > schema.max_record_bytes), F.lit(None))
    for writer_id, writer in plan.writers.items():
        decoded = decoded.when(ids == _id(writer_id), from_avro(F.col("_body"), writer, options))
    if plan.foreign:
        decoded = decoded.when(ids.isin([_id(schema_id) for schema_id in plan.foreign]), F.lit(None))
    decoded = decoded.otherwise(F.raise_error(F.format_string(
        f"{REBUILD_MARK}schema id %d is new to the query (a new version of subject {plan.subject!r}?)",
        schema_id(ids))))
    with_record = staged.select("*", decoded.alias("_record"))
    record = F.col("_record")
    fields = {name: record[name] for name in schema.fields}
    checks = avro_checks(value, size, ids, record, fields, schema, plan)
    typed = {name: fields[name].cast(SPARK_TYPES[kind]) for name, kind in schema.fields.items()}
    return checked_events(with_record, typed, checks, schema, headers)


def avro_checks(value: Column, size: Column, ids: Column, record: Column, fields: dict[str, Column],
                schema: EventSchema, plan: AvroInput) -> list[Check]:
    """A record's checks in order, as parsing.dead_letter_checks's for JSON; every reason non-null.
    `ids`: each record's schema id as its 4 bytes (the number only in a dead letter's reason)."""
    short = size < HEADER_BYTES
    checks = [
        (value.isNull(), F.lit("empty value (null)")),
        (size > schema.max_record_bytes,
         F.format_string(f"oversized: %d bytes > max_record_bytes {schema.max_record_bytes}", size)),
        (short, F.format_string(f"not in the registry's wire format: %d bytes, shorter than its "
                                f"{HEADER_BYTES}-byte header", size)),
        (F.substring(value, 1, 1) != F.lit(b"\x00"),
         F.concat(F.lit("not in the registry's wire format: magic byte 0x"), F.hex(F.substring(value, 1, 1)),
                  F.lit(", not 0x00"))),
    ]
    if plan.foreign:
        (first_id, first_text), *others = plan.foreign.items()
        reason = F.when(ids == _id(first_id), F.lit(first_text))
        for foreign_id, text in others:
            reason = reason.when(ids == _id(foreign_id), F.lit(text))
        checks.append((ids.isin([_id(foreign_id) for foreign_id in plan.foreign]), reason))
    checks.append((record[DECODED].isNull(),
                   F.format_string("body does not decode with schema id %d", schema_id(ids))))
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


def _header(value: Column) -> tuple[Column, Column, Column]:
    """(whether a value has the wire format's header, its schema id's 4 bytes, its body). The id
    stays bytes, compared with each known id's bytes: turned into a number for every record (hex,
    then base 16 to 10) it took most of the parse's time."""
    is_wire = (F.octet_length(value) >= HEADER_BYTES) & (F.substring(value, 1, 1) == F.lit(b"\x00"))
    id_bytes = F.when(is_wire, F.substring(value, 2, 4))
    body = F.when(is_wire, F.substring(value, HEADER_BYTES + 1, 2147483647))
    return is_wire, id_bytes, body


def schema_id(id_bytes: Column) -> Column:
    """A schema id's 4 bytes (big-endian) as its number, for the texts that name it."""
    return F.conv(F.hex(id_bytes), 16, 10).cast("bigint")


def _id(schema_id: int) -> Column:
    """A schema id as the wire format writes it: 4 bytes, big-endian."""
    return F.lit(schema_id.to_bytes(4, "big"))
