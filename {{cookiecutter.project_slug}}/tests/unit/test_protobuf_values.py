"""Protobuf values without a registry or Spark: a schema compiled by protoc and its message found
with its indexes; `[schema]` held to the reader's message; the batch id the sink appends is the
message's `batch_id` as protobuf's own runtime reads it (apart from the job); the answers' `.proto`
file is held to the answer."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pyspark.sql import types as T

from {{ cookiecutter.package_name }}.config import ConfigError, load_config
from {{ cookiecutter.package_name }}.formats.protobuf_input import check_fields
from {{ cookiecutter.package_name }}.formats.protobuf_output import read_schema, schema_for
from {{ cookiecutter.package_name }}.formats.protobuf_schema import descriptor_set, message
from {{ cookiecutter.package_name }}.sink.batch_records import stamped_values

SCHEMA = '''syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  optional string color = 1;
  int64 quantity = 2;
  Status status = 3;
  repeated string tags = 4;
  google.protobuf.Timestamp at = 5;
  message Line { double price = 1; }
}
message Refund { uint64 amount = 1; }
enum Status { OPEN = 0; DONE = 1; }
'''
ANSWER = T.StructType([T.StructField("key", T.StringType(), True), T.StructField("count", T.LongType(), False)])


def message_class(descriptors: bytes, name: str):
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(descriptors).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def test_a_message_is_found_by_its_full_name_with_its_indexes_and_fields():
    compiled = descriptor_set(SCHEMA, "input_subject", "a test schema")
    first = message(compiled, "", "input_message", "a test schema")
    assert (first.name, first.indexes) == ("shop.Order", (0,))
    assert first.fields == {"color": "string", "quantity": "int64", "status": "enum", "tags": "repeated string",
                            "at": "message"}
    assert message(compiled, "shop.Refund", "input_message", "x").indexes == (1,)
    assert message(compiled, "shop.Order.Line", "input_message", "x").indexes == (0, 0)
    with pytest.raises(ConfigError, match=r"input_message.*shop\.Missing.*'shop\.Order', 'shop\.Order\.Line'"):
        message(compiled, "shop.Missing", "input_message", "x")


def test_the_base64_descriptor_confluents_serializers_register_reads_as_the_text_does():
    import base64

    compiled = descriptor_set(SCHEMA, "input_subject", "x")
    own = descriptor_pb2.FileDescriptorSet.FromString(compiled).file[-1]
    as_registered = base64.b64encode(own.SerializeToString()).decode()
    assert message(descriptor_set(as_registered, "input_subject", "y"), "", "m", "y") == message(compiled, "", "m", "x")


def test_a_schema_that_does_not_compile_names_the_option():
    with pytest.raises(ConfigError, match=r"input_subject.*does not compile as a \.proto file"):
        descriptor_set('syntax = "proto3";\nmessage A { nope b = 1; }\n', "input_subject", "version 3")


@pytest.mark.parametrize(("fields", "problem"), [
    ({"color": "string", "quantity": "int", "status": "string"}, None),
    ({"quantity": "float"}, None),
    ({"size": "string"}, "field 'size' is not in message shop.Order"),
    ({"quantity": "bool"}, "field 'quantity' is int64 in message shop.Order.*a bool field reads bool"),
    ({"tags": "string"}, "field 'tags' is repeated string"),
])
def test_schema_fields_must_be_scalars_of_the_readers_message_of_a_type_they_read(fields, problem):
    reader = message(descriptor_set(SCHEMA, "input_subject", "x"), "", "input_message", "x")
    if problem is None:
        check_fields(reader, fields, "the latest version")
    else:
        with pytest.raises(ConfigError, match=problem):
            check_fields(reader, fields, "the latest version")


@pytest.mark.parametrize("batch_id", [0, 1, 127, 128, 2**31, 2**62])
def test_the_appended_batch_id_is_the_messages_batch_id_field(batch_id):
    compiled = descriptor_set(schema_for(ANSWER, "counts"), "output_schema", "x")
    counts = message_class(compiled, "counts")
    body = counts(key="red", count=7).SerializeToString()
    header = b"\x00\x00\x00\x00\x07\x00"
    chunk = pa.RecordBatch.from_pydict({"topic": ["counts", "dead", None], "key": [b"red", b"t/0/1", b"0"],
                                        "value": [header + body, b'{"reason":"x"}', None]})
    stamped = stamped_values(chunk, batch_id, frozenset(), {"counts": 3}).to_pylist()
    read = counts.FromString(stamped[0][len(header):])
    assert (read.key, read.count, read.batch_id) == ("red", 7, batch_id)
    assert json.loads(stamped[1]) == {"reason": "x", "batch_id": batch_id}
    assert stamped[2] is None


def test_the_proto_file_must_fit_the_answer(tmp_path):
    path = tmp_path / "output.proto"
    config = load_config(None, {"output_format": "protobuf", "schema_registry.url": "http://registry:8081",
                                "output_schema": str(path)}, environ={})
    path.write_text(schema_for(ANSWER, "counts"))
    _, compiled = read_schema(config, ANSWER)
    assert message(compiled, "", "o", "o").fields == {"key": "string", "count": "int64", "batch_id": "int64"}
    for wrong, problem in ((schema_for(ANSWER, "counts").replace("int64 count", "int32 count"), "does not fit"),
                           (schema_for(ANSWER, "counts").replace("batch_id = 3", "batch_id = 0").replace(
                               "count = 2", "count = 9"), "does not compile"),
                           (schema_for(ANSWER, "counts").replace("batch_id = 3", "batch_id = 1").replace(
                               "key = 1", "key = 3"), "highest field number")):
        path.write_text(wrong)
        with pytest.raises(ConfigError, match=f"output_schema.*{problem}"):
            read_schema(config, ANSWER)
