"""Protobuf answers in the registry's wire format, encoded in the JVM (protobuf_codec/): the
header (magic byte 0, the schema id), the message indexes, then the message with the answer's
fields. The schema is the project's `.proto` file (`output_schema`): its first message holds the
answer's fields in order, then `batch_id` (int64), the field the sink appends as it produces (a
Protobuf message may be written in parts: a field's tag and value after the others are that
field: sink/batch_records.py), so that a batch's plan holds nothing of its id."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..config import JobConfig
from ..failures import ConfigError
from .protobuf_schema import descriptor_set, message
from .registry import Registry

BATCH_ID = "batch_id"  # the message's last field, which the sink writes
ENCODE = "protobuf_encode_answer"  # the encoder's name as a function of Spark's SQL
# Spark's types of an answer's fields, as Protobuf writes them (a timestamp in microseconds, a date in days).
PROTOBUF_TYPES: dict[type[T.DataType], str] = {
    T.StringType: "string", T.LongType: "int64", T.IntegerType: "int32", T.DoubleType: "double",
    T.FloatType: "float", T.BooleanType: "bool", T.BinaryType: "bytes", T.TimestampType: "int64",
    T.DateType: "int32",
}


@dataclass(frozen=True)
class ProtobufOutput:
    """The answers' schema as registered (its id), compiled, its message and where the sink writes `batch_id`."""

    schema_id: int
    descriptors: bytes
    message: str
    indexes: tuple[int, ...]
    batch_id_number: int


def subject_name(config: JobConfig) -> str:
    return config.output_subject or f"{config.output_topic}-value"


def schema_for(answer: T.StructType, name: str) -> str:
    """The `.proto` file an answer of this Spark type is published with: its fields in order
    (each `optional`, so that a null stays apart from a zero), then `batch_id`."""
    lines = ['syntax = "proto3";', "", f"message {name} " + "{"]
    for number, item in enumerate(answer.fields, start=1):
        kind = PROTOBUF_TYPES.get(type(item.dataType))
        if kind is None:
            raise ConfigError("output_format", f"the answer's field {item.name!r} is {item.dataType.simpleString()}, "
                                               f"which Protobuf output does not write; it writes "
                                               f"{', '.join(sorted(t().simpleString() for t in PROTOBUF_TYPES))}")
        lines.append(f"  optional {kind} {item.name} = {number};")
    lines += [f"  int64 {BATCH_ID} = {len(answer.fields) + 1};", "}", ""]
    return "\n".join(lines)


def message_name(config: JobConfig) -> str:
    """A Protobuf name from the output topic: letters, digits and `_`, not starting with a digit."""
    name = "".join(c if c.isalnum() and c.isascii() else "_" for c in config.output_topic)
    return name if name[:1].isalpha() else f"_{name}"


def read_schema(config: JobConfig, answer: T.StructType) -> tuple[str, bytes]:
    """The project's `.proto` file, compiled and checked against the answer: its first message
    holds the answer's fields, names and types, in order, then `batch_id` (int64)."""
    path = Path(config.output_schema)
    hint = f"`{{ cookiecutter.package_name }} protobuf-schema > {path}` writes one that fits"
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError("output_schema", f"cannot read {path}: {error.strerror}; {hint}") from None
    compiled = descriptor_set(text, "output_schema", str(path))
    first = message(compiled, "", "output_schema", str(path))
    wanted = [(item.name, PROTOBUF_TYPES.get(type(item.dataType))) for item in answer.fields] + [(BATCH_ID, "int64")]
    found = list(first.fields.items())
    if found != wanted:
        difference = next(((f, w) for f, w in zip(found, wanted, strict=False) if f != w), (found[-1:], wanted[-1:]))
        raise ConfigError("output_schema", f"{path}'s message {first.name} does not fit the answer: it has "
                                           f"{difference[0]} where the answer needs {difference[1]}; {hint}")
    if first.numbers[BATCH_ID] != max(first.numbers.values()):
        raise ConfigError("output_schema", f"{path}'s {BATCH_ID} must have the message's highest field number; {hint}")
    return text, compiled


def prepare(config: JobConfig, answer: T.StructType, registry: Registry) -> ProtobufOutput:
    """The checked schema, registered (or found registered) under the output subject: its id."""
    text, compiled = read_schema(config, answer)
    subject = subject_name(config)
    if config.output_schema_registration == "register":
        schema_id = registry.register(subject, text, "output_schema", "PROTOBUF")
    else:
        schema_id = registry.existing(subject, text, "PROTOBUF")
    first = message(compiled, "", "output_schema", config.output_schema)
    return ProtobufOutput(schema_id, compiled, first.name, first.indexes, first.numbers[BATCH_ID])


def encode(answer: Column, output: ProtobufOutput) -> Column:
    """The answer's value without its last field, `batch_id`: the header, the indexes, the body."""
    spark = SparkSession.active()
    jvm = spark._jvm
    assert jvm is not None
    codec = jvm.{{ cookiecutter.package_name }}.protobuf
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    indexes = gateway.new_array(jvm.int, len(output.indexes))
    for position, index in enumerate(output.indexes):
        indexes[position] = index
    encoder = codec.ProtobufEncoder(bytearray(output.descriptors), output.message, output.schema_id, indexes)
    spark._jsparkSession.udf().register(ENCODE, encoder, jvm.org.apache.spark.sql.types.DataTypes.BinaryType)
    return F.call_function(ENCODE, answer)
