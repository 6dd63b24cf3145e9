"""Avro input in the registry's wire format, decoded in the JVM into the columns the JSON parse
gives (parsing.py): the header checked, each record's body read by spark-avro's
`from_avro` with its own writer schema (one branch per version of the input's subject) and resolved
into the reader schema, the subject's latest version; `[schema]`'s fields taken from it. What does
not decode is a dead letter with its reason, its raw bytes kept.

An id the query's plan has no schema for costs one rebuild of the query (wire_format.py).

Limits: trailing bytes after a body are not noticed (Avro's binary encoding has no end marker);
a body written with another schema that happens to decode with its id's is read as that."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..formats.avro_input import DECODED, AvroInput
from .parsing import Check, EventSchema
from .wire_format import Decoder, parse_wire_format, schema_id


def parse_avro(records: DataFrame, schema: EventSchema, plan: AvroInput) -> DataFrame:
    """Kafka records to parsed events or dead letters with a reason: the columns of parsing.parse_records."""
    from pyspark.sql.avro.functions import from_avro

    options = {"avroSchema": plan.reader, "mode": "PERMISSIVE"}

    def decoder(writer: str) -> Decoder:
        return lambda body: from_avro(body, writer, options)

    def undecoded(record: Column, ids: Column) -> Check:
        return record[DECODED].isNull(), F.format_string("body does not decode with schema id %d", schema_id(ids))

    decoders = {writer_id: decoder(writer) for writer_id, writer in plan.writers.items()}
    return parse_wire_format(records, schema, plan, decoders,
                             lambda record: {name: record[name] for name in schema.fields}, undecoded)
