"""Protobuf input in the registry's wire format, decoded in the JVM into the columns the JSON parse
gives (parsing.py): the header checked (wire_format.py), each record's body read by the job's
codec (formats/protobuf_codec/) with its own writer schema (one decoder per version of the input's
subject), the message indexes first, which must name the reader's message (`input_message`);
`[schema]`'s fields taken from it. What does not decode is a dead letter with its reason, its raw
bytes kept.

An id the query's plan has no schema for costs one rebuild of the query (wire_format.py).

Limits: a scalar field without presence (proto3's plain fields) reads as its default when unset,
so a missing key of that kind is the empty string, not a dead letter; declare it `optional`."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..formats.protobuf_input import ProtobufInput
from .parsing import Check, EventSchema
from .wire_format import Decoder, parse_wire_format

# What a decoder gives: the message's scalar fields as text, or why the body is not the reader's message.
DECODED = T.StructType([T.StructField("fields", T.MapType(T.StringType(), T.StringType())),
                        T.StructField("reason", T.StringType())])


def parse_protobuf(records: DataFrame, schema: EventSchema, plan: ProtobufInput) -> DataFrame:
    """Kafka records to parsed events or dead letters with a reason: the columns of parsing.parse_records."""

    def decoder(writer_id: int, descriptors: bytes) -> Decoder:
        name = register_decoder(records.sparkSession, writer_id, descriptors, plan.message)
        return lambda body: F.call_function(name, body)

    def undecoded(record: Column, _ids: Column) -> Check:
        return record["reason"].isNotNull(), record["reason"]

    decoders = {writer_id: decoder(writer_id, descriptors) for writer_id, descriptors in plan.writers.items()}
    return parse_wire_format(records, schema, plan, decoders,
                             lambda record: {name: record["fields"][name] for name in schema.fields}, undecoded)


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
