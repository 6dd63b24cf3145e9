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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..failures import REBUILD_MARK
from ..formats.avro_input import DECODED, AvroInput
from .parsing import HEADERS, SPARK_TYPES, Check, EventSchema, checked_events
from .wire_format import field_checks, header, header_checks, id_literal, schema_id


def parse_avro(records: DataFrame, schema: EventSchema, plan: AvroInput) -> DataFrame:
    """Kafka records to parsed events or dead letters with a reason: the columns of parsing.parse_records."""
    from pyspark.sql.avro.functions import from_avro

    headers = [HEADERS] if HEADERS in records.columns else []
    value, size = F.col("value"), F.octet_length(F.col("value"))
    is_wire, id_bytes, body = header(value)
    staged = records.select("value", "topic", "partition", "offset", *headers, is_wire.alias("_is_wire"),
                            id_bytes.alias("_id_bytes"), body.alias("_body"))
    wire, ids = F.col("_is_wire"), F.col("_id_bytes")
    options = {"avroSchema": plan.reader, "mode": "PERMISSIVE"}
    decoded = F.when(~wire | (size > schema.max_record_bytes), F.lit(None))
    for writer_id, writer in plan.writers.items():
        decoded = decoded.when(ids == id_literal(writer_id), from_avro(F.col("_body"), writer, options))
    if plan.foreign:
        decoded = decoded.when(ids.isin([id_literal(schema_id) for schema_id in plan.foreign]), F.lit(None))
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
    checks = header_checks(value, size, ids, schema, plan.foreign)
    checks.append((record[DECODED].isNull(),
                   F.format_string("body does not decode with schema id %d", schema_id(ids))))
    return [*checks, *field_checks(fields, schema)]
