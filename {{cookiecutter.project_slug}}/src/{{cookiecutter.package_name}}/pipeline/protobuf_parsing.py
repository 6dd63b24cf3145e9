"""Protobuf input in the registry's wire format, decoded in the JVM into the columns the JSON parse
gives (parsing.py): the header checked (wire_format.py), each record's body read by the job's
codec (formats/protobuf_codec/) with its own writer schema (one decoder per version of the input's
subject), the message indexes first, which must name the reader's message (`input_message`);
`[schema]`'s fields taken from it. What does not decode is a dead letter with its reason, its raw
bytes kept.

An id the query's plan has no schema for fails the batch, nothing of it published, with a message
that has the job build the query again (failures.Outcome.REBUILD), as for Avro (avro_parsing.py).

Limits: a scalar field without presence (proto3's plain fields) reads as its default when unset,
so a missing key of that kind is the empty string, not a dead letter; declare it `optional`."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..failures import REBUILD_MARK
from ..formats.protobuf_input import ProtobufInput
from .parsing import HEADERS, SPARK_TYPES, Check, EventSchema, checked_events
from .wire_format import field_checks, header, header_checks, id_literal, schema_id

# What a decoder gives: the message's scalar fields as text, or why the body is not the reader's message.
DECODED = T.StructType([T.StructField("fields", T.MapType(T.StringType(), T.StringType())),
                        T.StructField("reason", T.StringType())])


def parse_protobuf(records: DataFrame, schema: EventSchema, plan: ProtobufInput) -> DataFrame:
    """Kafka records to parsed events or dead letters with a reason: the columns of parsing.parse_records."""
    spark = records.sparkSession
    headers = [HEADERS] if HEADERS in records.columns else []
    value, size = F.col("value"), F.octet_length(F.col("value"))
    is_wire, id_bytes, body = header(value)
    staged = records.select("value", "topic", "partition", "offset", *headers, is_wire.alias("_is_wire"),
                            id_bytes.alias("_id_bytes"), body.alias("_body"))
    wire, ids = F.col("_is_wire"), F.col("_id_bytes")
    decoded = F.when(~wire | (size > schema.max_record_bytes), F.lit(None))
    for writer_id, descriptors in plan.writers.items():
        decoded = decoded.when(ids == id_literal(writer_id),
                               F.call_function(register_decoder(spark, writer_id, descriptors, plan.message),
                                               F.col("_body")))
    if plan.foreign:
        decoded = decoded.when(ids.isin([id_literal(schema_id) for schema_id in plan.foreign]), F.lit(None))
    decoded = decoded.otherwise(F.raise_error(F.format_string(
        f"{REBUILD_MARK}schema id %d is new to the query (a new version of subject {plan.subject!r}?)",
        schema_id(ids))))
    with_record = staged.select("*", decoded.alias("_record"))
    record = F.col("_record")
    fields = {name: record["fields"][name] for name in schema.fields}
    checks = protobuf_checks(value, size, ids, record, fields, schema, plan)
    typed = {name: fields[name].cast(SPARK_TYPES[kind]) for name, kind in schema.fields.items()}
    return checked_events(with_record, typed, checks, schema, headers)


def protobuf_checks(value: Column, size: Column, ids: Column, record: Column, fields: dict[str, Column],
                    schema: EventSchema, plan: ProtobufInput) -> list[Check]:
    """A record's checks in order, as parsing.dead_letter_checks's for JSON; every reason non-null."""
    checks = header_checks(value, size, ids, schema, plan.foreign)
    checks.append((record["reason"].isNotNull(), record["reason"]))
    return [*checks, *field_checks(fields, schema)]


def register_decoder(spark: SparkSession, schema_id: int, descriptors: bytes, message: str) -> str:
    """The decoder of one writer schema, as a function of Spark's SQL (serialized to the executors
    with its schema); its name."""
    jvm = spark._jvm
    assert jvm is not None
    codec = jvm.{{ cookiecutter.package_name }}.protobuf
    decoder = codec.ProtobufDecoder(bytearray(descriptors), message, schema_id)
    name = f"protobuf_decode_schema_{schema_id}"
    data_type = jvm.org.apache.spark.sql.types.DataType.fromDDL(DECODED.simpleString())
    spark._jsparkSession.udf().register(name, decoder, data_type)
    return name
