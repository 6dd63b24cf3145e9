"""The JVM parse, run by a local Spark (no Kafka): every input gets its typed fields or a reason,
and no input can fail the job."""

from __future__ import annotations

import base64
import json

import pytest
from pyspark.sql import SparkSession

from {{ cookiecutter.package_name }}.identifiers import PARSE_COLUMNS
from {{ cookiecutter.package_name }}.pipeline.dead_letters import (
    DEAD_LETTER_KEY,
    DEAD_LETTER_VALUE,
    MAX_DEAD_LETTER_VALUE_BYTES,
    with_dead_letter_record,
)
from {{ cookiecutter.package_name }}.pipeline.parsing import IS_EVENT, REASON, EventSchema, parse_records

SCHEMA = EventSchema(fields={"color": "string", "size": "int", "weight": "float", "fresh": "bool"},
                     key_field="color", max_record_bytes=65536)
RECORDS_DDL = "topic STRING, partition INT, offset BIGINT, value BINARY"


def parse(spark: SparkSession, *values: bytes | None, schema: EventSchema = SCHEMA) -> list[dict]:
    records = spark.createDataFrame([("events", 0, i, v) for i, v in enumerate(values)], RECORDS_DDL)
    return [row.asDict() for row in parse_records(records, schema).orderBy("offset").collect()]


def reason_of(spark: SparkSession, value: bytes | None, schema: EventSchema = SCHEMA) -> str | None:
    [event] = parse(spark, value, schema=schema)
    # The count reads is_event, the dead letters their reason: the two must agree on every input.
    assert event[IS_EVENT] is (event[REASON] is None), event
    return event[REASON]


def test_a_good_event_keeps_its_typed_fields(spark):
    [event] = parse(spark, b'{"color": "red", "size": 3, "weight": 2, "fresh": true, "extra": {"a": [1]}}')
    assert event[REASON] is None
    assert (event["color"], event["size"], event["weight"], event["fresh"]) == ("red", 3, 2.0, True)
    assert event["raw_value"] is None  # the raw bytes travel only with dead letters


def test_optional_fields_may_be_missing_or_null_but_the_key_may_not(spark):
    good, null_size, no_key, null_key = parse(
        spark, b'{"color": "red"}', b'{"color": "red", "size": null}', b'{"size": 3}', b'{"color": null}')
    assert good[REASON] is None and good["size"] is None
    assert null_size[REASON] is None and null_size["size"] is None
    assert no_key[REASON] == "missing key field 'color'"
    assert null_key[REASON] == "missing key field 'color'"


def test_json_escapes_and_surrogate_pairs_are_decoded(spark):
    [event] = parse(spark, b'{"color": "a\\"b\\ud83d\\ude00"}')
    assert event[REASON] is None and event["color"] == 'a"b\U0001F600'


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "empty value (null)"),
        (b"", "not JSON: empty value"),
        (b"{not json", "not JSON: cannot be parsed"),
        (b"\xff\xfe", "not JSON: invalid UTF-8"),
        (b"\x80abc", "not JSON: invalid UTF-8"),
        (b'{"color": "\xed\xa0\x80"}', "not JSON: invalid UTF-8"),  # a surrogate's raw UTF-8 bytes
        (b'{"color": "\\ud800"}', "not JSON: cannot be parsed"),  # a lone surrogate escape
        (b'{"color": "x\\udc00y"}', "not JSON: cannot be parsed"),
        (b"[" * 1000, "not JSON: cannot be parsed"),  # deep nesting, never closed
        (b"[" * 100_000 + b"]" * 100_000, "oversized"),
        (b"[" * 1000 + b"]" * 1000, "not a JSON object: array"),  # deep nesting, well formed
        (b"[1, 2]", "not a JSON object: array"),
        (b' "red"', "not a JSON object: string"),
        (b"12", "not a JSON object: number"),
        (b"true", "not a JSON object: boolean"),
        (b"null", "not a JSON object: null"),
        (b'{"color": "red"} trailing', "not JSON: content after the object"),
        # Content after the object that itself ends in a brace: the variant parser stops after the
        # first object, so each of these once counted `red` and dropped the rest silently.
        (b'{"color": "red"} {"color": "blue"}', "not JSON: content after the object"),
        (b'{"color": "red"}{"color": "blue"}', "not JSON: content after the object"),
        (b'{"color": "red"}, {"color": "blue"}', "not JSON: content after the object"),
        (b'{"color": "red"}] {"x": 1}', "not JSON: content after the object"),
        (b'{"color": "red"}} x}', "not JSON: content after the object"),
        (b'{"color": "red"} x}', "not JSON: content after the object"),
        (b'{"color": "red", "n": {"a": 1}} {"color": "blue"}', "not JSON: content after the object"),
        ('{"color": "rød"} {"color": "blå"}'.encode(), "not JSON: content after the object"),
        ('{"color": "rød"}x}'.encode(), "not JSON: content after the object"),
        (b'{"color": 42}', "field 'color' has JSON type number, expected string"),
        (b'{"color": 1e400}', "field 'color' has JSON type number, expected string"),
        (b'{"color": ["red"]}', "field 'color' has JSON type array, expected string"),
        (b'{"color": "red", "size": "3"}', "field 'size' has JSON type string, expected int"),
        (b'{"color": "red", "size": 2.5}', "field 'size' has JSON type number, expected int"),
        (b'{"color": "red", "size": 123456789012345678901234567890}',
         "field 'size' has JSON type number, expected int"),  # past 64 bits
        (b'{"color": "red", "size": true}', "field 'size' has JSON type boolean, expected int"),
        (b'{"color": "red", "size": {"n": 1}}', "field 'size' has JSON type object, expected int"),
        (b'{"color": "red", "fresh": 1}', "field 'fresh' has JSON type number, expected bool"),
        (b'{"color": "red", "weight": "2"}', "field 'weight' has JSON type string, expected float"),
        (json.dumps({"color": "x" * 70_000}).encode(), "oversized: 70013 bytes > max_record_bytes 65536"),
    ],
)
def test_malformed_values_become_dead_letters_with_a_reason(spark, value, reason):
    got = reason_of(spark, value)
    assert got is not None and got.startswith(reason), got


def test_objects_with_braces_inside_or_space_around_are_good_events(spark):
    values = [b'{"color": "}"}', b'{"color": "{red}"} ', b' \t{"color": "red"}\r\n',
              b'{"color": "red", "n": {"a": [{"b": 1}]}}', b'{"color": "red", "s": "} {"}',
              '{"color": "rød"}'.encode(), '{"color": "blå"}\n'.encode()]
    events = parse(spark, *values)
    assert [(e[IS_EVENT], e[REASON]) for e in events] == [(True, None)] * len(values)
    assert [e["color"] for e in events] == ["}", "{red}", "red", "red", "red", "rød", "blå"]


def test_numbers_a_float_field_accepts(spark):
    events = parse(spark, b'{"color": "a", "weight": 2}', b'{"color": "a", "weight": 2.5}',
                   b'{"color": "a", "weight": 1e3}', b'{"color": "a", "weight": 0.1234567890123456789}')
    assert [e[REASON] for e in events] == [None] * 4
    assert [e["weight"] for e in events] == pytest.approx([2.0, 2.5, 1000.0, 0.123456789])


def test_dead_letters_keep_source_coordinates_and_raw_bytes(spark):
    good, bad = parse(spark, b'{"color": "red"}', b"oops")
    assert (bad["topic"], bad["partition"], bad["offset"], bad["raw_value"]) == ("events", 0, 1, b"oops")
    assert bad["color"] is None and good["raw_value"] is None


def test_field_names_that_need_quoting_in_a_path(spark):
    schema = EventSchema(fields={"it's.a key": "string"}, key_field="it's.a key", max_record_bytes=1000)
    [event] = parse(spark, json.dumps({"it's.a key": "v"}).encode(), schema=schema)
    assert event[REASON] is None and event["it's.a key"] == "v"


def test_a_dead_letter_record_is_built_in_the_jvm(spark):
    big = b'{"color": ' + b"1" * (MAX_DEAD_LETTER_VALUE_BYTES + 10) + b"}"
    schema = EventSchema(fields={"color": "string"}, key_field="color",
                         max_record_bytes=10 * MAX_DEAD_LETTER_VALUE_BYTES)
    records = spark.createDataFrame([("events", 3, 41, b'{"color": "red"}'), ("events", 3, 42, b"\xffoops"),
                                     ("events", 3, 43, big)], RECORDS_DDL)
    rows = with_dead_letter_record(parse_records(records, schema)).orderBy("offset").collect()
    assert rows[0][DEAD_LETTER_KEY] is None and rows[0][DEAD_LETTER_VALUE] is None
    assert rows[1][DEAD_LETTER_KEY] == "events/3/42"
    value = json.loads(rows[1][DEAD_LETTER_VALUE])
    assert value == {"reason": "not JSON: invalid UTF-8", "source_topic": "events", "source_partition": 3,
                     "source_offset": 42, "value_base64": "/29vcHM=", "value_truncated": False}
    truncated = json.loads(rows[2][DEAD_LETTER_VALUE])
    assert truncated["value_truncated"] is True
    assert len(base64.b64decode(truncated["value_base64"])) == MAX_DEAD_LETTER_VALUE_BYTES


def test_the_columns_the_parse_adds_are_the_names_a_field_may_not_take(spark):
    records = spark.createDataFrame([], RECORDS_DDL)
    assert parse_records(records, SCHEMA).columns == [*SCHEMA.fields, *PARSE_COLUMNS]

{%- if cookiecutter.query == "windowed-count" %}

TIMED = EventSchema(fields={"color": "string", "at": "int"}, key_field="color", max_record_bytes=65536,
                    event_time_field="at")


@pytest.mark.parametrize("value, reason", [
    (b'{"color": "red"}', "missing event-time field 'at'"),
    (b'{"color": "red", "at": null}', "missing event-time field 'at'"),
    (b'{"color": "red", "at": "noon"}', "field 'at' has JSON type string, expected int"),
    (b'{"color": "red", "at": -1}', "event-time field 'at' is -1, outside 0 to 253402300799999 (epoch milliseconds)"),
    (b'{"color": "red", "at": 253402300800000}', "event-time field 'at' is 253402300800000, outside 0 to "
                                                 "253402300799999 (epoch milliseconds)"),
    (b'{"color": "red", "at": 1767225600000}', None),
])
def test_an_event_time_is_required_and_must_be_a_time_the_windows_hold(spark, value, reason):
    assert reason_of(spark, value, TIMED) == reason


def test_with_an_event_time_every_record_keeps_its_raw_bytes(spark):
    """A windowed count finds an event late after the shuffle, and makes its dead letter there."""
    [event] = parse(spark, b'{"color": "red", "at": 5}', schema=TIMED)
    assert event[REASON] is None and event["raw_value"] == bytearray(b'{"color": "red", "at": 5}')
{%- endif %}
