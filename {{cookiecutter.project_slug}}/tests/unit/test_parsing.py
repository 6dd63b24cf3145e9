from __future__ import annotations

import json

import pyarrow as pa
import pytest

from {{ cookiecutter.package_name }}.parsing import REASON, EventSchema, parse_batch, parse_value

SCHEMA = EventSchema(fields={"color": "string", "size": "int", "weight": "float", "fresh": "bool"},
                     key_field="color", max_record_bytes=200)


def test_a_good_event_keeps_its_typed_fields():
    fields, reason = parse_value(b'{"color": "red", "size": 3, "weight": 2, "fresh": true, "extra": 1}', SCHEMA)
    assert reason is None
    assert fields == {"color": "red", "size": 3, "weight": 2.0, "fresh": True}


def test_optional_fields_may_be_missing_but_the_key_may_not():
    assert parse_value(b'{"color": "red"}', SCHEMA)[0] == {"color": "red", "size": None, "weight": None,
                                                          "fresh": None}
    assert parse_value(b'{"size": 3}', SCHEMA) == (None, "missing key field 'color'")
    assert parse_value(b'{"color": null}', SCHEMA) == (None, "missing key field 'color'")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"\x80abc", "not JSON: invalid UTF-8"),
        (b"[1, 2]", "not a JSON object: list"),
        (b'"red"', "not a JSON object: str"),
        (b'{"color": 42}', "field 'color' has JSON type number, expected string"),
        (b'{"color": "red", "size": "3"}', "field 'size' has JSON type string, expected int"),
        (b'{"color": "red", "size": true}', "field 'size' has JSON type boolean, expected int"),
        (b'{"color": "red", "fresh": 1}', "field 'fresh' has JSON type number, expected bool"),
        (None, "empty value (null)"),
        (json.dumps({"color": "x" * 300}).encode(), "oversized: 313 bytes > max_record_bytes 200"),
    ],
)
def test_malformed_values_get_a_reason(value, reason):
    fields, got = parse_value(value, SCHEMA)
    assert fields is None
    assert got.startswith(reason)


def test_a_batch_keeps_source_coordinates_and_raw_bytes_of_dead_letters_only():
    batch = pa.RecordBatch.from_pydict({
        "topic": ["events", "events"], "partition": [0, 3], "offset": [10, 11],
        "value": [b'{"color": "red"}', b"oops"],
    })
    parsed = parse_batch(batch, SCHEMA).to_pydict()
    assert parsed["color"] == ["red", None]
    assert parsed[REASON][0] is None and parsed[REASON][1].startswith("not JSON")
    assert parsed["partition"] == [0, 3] and parsed["offset"] == [10, 11]
    assert parsed["raw_value"] == [None, b"oops"]
    assert parse_batch(batch, SCHEMA).schema == SCHEMA.arrow_schema()
