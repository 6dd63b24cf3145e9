"""Avro values without a registry or Spark: the batch id the sink appends is the record's last
field as an Avro reader reads it (fastavro, apart from the job); the answers' schema file is held
to the answer; the registry's options are checked at start and its secrets never printed."""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from {{ cookiecutter.package_name }}.config import ConfigError, load_config
from {{ cookiecutter.package_name }}.formats.avro_input import AvroInput, reader_schema
from {{ cookiecutter.package_name }}.formats.avro_output import read_schema, schema_for
from {{ cookiecutter.package_name }}.formats.registry import Subject
from {{ cookiecutter.package_name }}.masking import masked, secret_values
from {{ cookiecutter.package_name }}.sink.batch_records import avro_long, stamped_values

ANSWER = T.StructType([T.StructField("key", T.StringType(), True), T.StructField("count", T.LongType(), False)])
FULL = schema_for(ANSWER, "counts")  # the answer's fields, then batch_id


def written(record: dict, schema: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def read(body: bytes, schema: dict) -> dict:
    return fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(schema))


@pytest.mark.parametrize("batch_id", [0, 1, 63, 64, 8191, 8192, 2**31, 2**62])
def test_the_appended_batch_id_is_the_records_last_field(batch_id):
    without = {**FULL, "fields": FULL["fields"][:-1]}
    body = written({"key": "red", "count": 7}, without)
    assert body + avro_long(batch_id) == written({"key": "red", "count": 7, "batch_id": batch_id}, FULL)
    assert read(body + avro_long(batch_id), FULL) == {"key": "red", "count": 7, "batch_id": batch_id}


def test_a_chunk_stamps_its_avro_topics_as_avro_and_the_others_as_json():
    avro_body = b"\x00\x00\x00\x00\x07" + written({"key": "red", "count": 7}, {**FULL, "fields": FULL["fields"][:-1]})
    chunk = pa.RecordBatch.from_pydict({
        "topic": ["counts", "dead", None], "key": [b"red", b"t/0/1", b"0"],
        "value": [avro_body, b'{"reason":"x"}', None]})
    stamped = stamped_values(chunk, 5, frozenset({"counts"})).to_pylist()
    assert read(stamped[0][5:], FULL)["batch_id"] == 5
    assert json.loads(stamped[1]) == {"reason": "x", "batch_id": 5}
    assert stamped[2] is None


def test_the_schema_file_must_fit_the_answer(tmp_path):
    path = tmp_path / "output.avsc"
    config = load_config(None, {"output_format": "avro", "schema_registry.url": "http://registry:8081",
                                "output_schema": str(path)}, environ={})
    # Whether a field may be null is the file's to say (to_avro refuses an actual null in a non-null one).
    for fitting in (FULL, {**FULL, "fields": [{"name": "key", "type": "string"}, *FULL["fields"][1:]]}):
        path.write_text(json.dumps(fitting))
        assert json.loads(read_schema(config, ANSWER)) == fitting
    for wrong in ({**FULL, "fields": FULL["fields"][:-1]},  # no batch_id
                  {**FULL, "fields": [FULL["fields"][1], FULL["fields"][0], FULL["fields"][2]]},  # another order
                  {**FULL, "fields": [{"name": "key", "type": ["null", "int"]}, *FULL["fields"][1:]]}):  # another type
        path.write_text(json.dumps(wrong))
        with pytest.raises(ConfigError, match=r"'output_schema': .* does not fit the answer"):
            read_schema(config, ANSWER)
    path.unlink()
    with pytest.raises(ConfigError, match=r"'output_schema': cannot read"):
        read_schema(config, ANSWER)


def test_the_input_subjects_latest_version_must_hold_the_schemas_fields():
    latest = {"type": "record", "name": "E", "fields": [{"name": "color", "type": ["null", "string"]},
                                                         {"name": "n", "type": "long"}]}
    subject = Subject("events-value", {3: json.dumps(latest)}, 3)
    reader = json.loads(reader_schema(subject, {"color": "string", "n": "int"}))
    assert [field["name"] for field in reader["fields"]][:2] == ["color", "n"]
    assert AvroInput("events-value", subject.writers, json.dumps(reader)).writers == {3: json.dumps(latest)}
    with pytest.raises(ConfigError, match="'schema': field 'size' is not in subject 'events-value'"):
        reader_schema(subject, {"size": "int"})
    with pytest.raises(ConfigError, match=r"'schema': field 'n' is long in subject 'events-value'.*a bool field"):
        reader_schema(subject, {"n": "bool"})


def test_avro_needs_the_registrys_url_and_its_credentials_are_never_printed():
    with pytest.raises(ConfigError, match=r"'schema_registry\.url': required with input_format or output_format avro"):
        load_config(None, {"input_format": "avro"}, environ={})
    config = load_config(None, {"input_format": "avro", "schema_registry.url": "http://registry:8081",
                                "schema_registry.basic.auth.user.info": "${REGISTRY_USER_INFO}"},
                         environ={"REGISTRY_USER_INFO": "job:s3cret"})
    assert config.schema_registry["basic.auth.user.info"] == "job:s3cret"
    assert "s3cret" not in json.dumps(masked(config)) and "job:s3cret" in secret_values(config)
    with pytest.raises(ConfigError, match=r"'output_format': 'xml' is not one of json, avro"):
        load_config(None, {"output_format": "xml"}, environ={})
