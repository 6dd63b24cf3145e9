"""Avro answers in the registry's wire format, encoded in the JVM: the header (magic byte 0, the
schema id), then spark-avro's `to_avro` of the answer's fields. The schema is the project's file
(`output_schema`): a record of the answer's fields, then `batch_id` (long). `to_avro` writes every
field but the last; the sink appends the batch id's long as it produces (Avro's binary record is its
fields one after another, so the appended long is the record's last field: sink/batch_records.py),
as it stamps a JSON answer, so that a batch's plan holds nothing of its id."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..config import JobConfig
from ..failures import ConfigError
from .registry import Registry

BATCH_ID = "batch_id"  # the schema's last field, which the sink writes
# Spark's types of an answer's fields, as Avro writes them.
AVRO_TYPES: dict[type[T.DataType], Any] = {
    T.StringType: "string", T.LongType: "long", T.IntegerType: "int", T.DoubleType: "double",
    T.FloatType: "float", T.BooleanType: "boolean", T.BinaryType: "bytes",
    T.TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
    T.DateType: {"type": "int", "logicalType": "date"},
}


@dataclass(frozen=True)
class AvroOutput:
    """The answers' schema as registered (its id), and the same without `batch_id`, which `to_avro` writes."""

    schema_id: int
    without_batch_id: str


def subject_name(config: JobConfig) -> str:
    return config.output_subject or f"{config.output_topic}-value"


def schema_for(answer: T.StructType, name: str) -> dict[str, Any]:
    """The Avro schema an answer of this Spark type is published with: its fields in order (a
    nullable one as a union with null), then `batch_id`."""
    fields = []
    for item in answer.fields:
        avro_type = AVRO_TYPES.get(type(item.dataType))
        if avro_type is None:
            raise ConfigError("output_format", f"the answer's field {item.name!r} is {item.dataType.simpleString()}, "
                                               f"which Avro output does not write; it writes "
                                               f"{', '.join(sorted(t().simpleString() for t in AVRO_TYPES))}")
        fields.append({"name": item.name, "type": ["null", avro_type], "default": None} if item.nullable
                      else {"name": item.name, "type": avro_type})
    fields.append({"name": BATCH_ID, "type": "long"})
    return {"type": "record", "name": name, "fields": fields}


def record_name(config: JobConfig) -> str:
    """An Avro name from the output topic: letters, digits and `_`, not starting with a digit."""
    name = "".join(c if c.isalnum() and c.isascii() else "_" for c in config.output_topic)
    return name if name[:1].isalpha() else f"_{name}"


def read_schema(config: JobConfig, answer: T.StructType) -> str:
    """The project's schema file, checked against the answer: the same fields, names and types,
    in order, then `batch_id` (long). Whether a field may be null is the file's to say: Spark's
    type may allow a null that the query never gives (a count kept by the TTL's Python operator),
    and `to_avro` refuses an actual null in a field the file declares non-null, failing the batch."""
    path = Path(config.output_schema)
    hint = f"`{{ cookiecutter.package_name }} avro-schema > {path}` writes one that fits"
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError("output_schema", f"cannot read {path}: {error.strerror}; {hint}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError("output_schema", f"{path} is not JSON: {error}") from None
    expected = schema_for(answer, record_name(config))
    if not isinstance(schema, dict) or schema.get("type") != "record" or not isinstance(schema.get("fields"), list):
        raise ConfigError("output_schema", f"{path} is not an Avro record schema; {hint}")
    found = [(item.get("name"), _comparable(item.get("type"))) for item in schema["fields"]]
    wanted = [(item["name"], _comparable(item["type"])) for item in expected["fields"]]
    if found != wanted:
        difference = next(((f, w) for f, w in zip(found, wanted, strict=False) if f != w), (found[-1:], wanted[-1:]))
        raise ConfigError("output_schema", f"{path} does not fit the answer: it has {difference[0]} where the answer "
                                           f"needs {difference[1]}; {hint}")
    return text


def _comparable(avro_type: Any) -> str:
    """The type without its nullability: a union of null and one type is that type."""
    if isinstance(avro_type, list) and "null" in avro_type and len(avro_type) == 2:
        avro_type = next(kind for kind in avro_type if kind != "null")
    return json.dumps(avro_type, sort_keys=True)


def prepare(config: JobConfig, answer: T.StructType, registry: Registry) -> AvroOutput:
    """The checked schema, registered (or found registered) under the output subject: its id."""
    text = read_schema(config, answer)
    subject = subject_name(config)
    if config.output_schema_registration == "register":
        schema_id = registry.register(subject, text, "output_schema")
    else:
        schema_id = registry.existing(subject, text)
    schema = json.loads(text)
    schema["fields"] = [item for item in schema["fields"] if item.get("name") != BATCH_ID]
    return AvroOutput(schema_id, json.dumps(schema))


def encode(answer: Column, output: AvroOutput) -> Column:
    """The answer's value without its last field, `batch_id`: the header, then the Avro body."""
    from pyspark.sql.avro.functions import to_avro

    header = F.lit(b"\x00" + output.schema_id.to_bytes(4, "big"))
    return F.concat(header, to_avro(answer, output.without_batch_id))
