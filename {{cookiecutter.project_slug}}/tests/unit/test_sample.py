"""The sample's expected counts follow the configured filter and schema (issue: tests that follow
the template's answers), with the filter evaluated by Spark SQL apart from the job."""

from __future__ import annotations

import json

import pytest

from {{ cookiecutter.package_name }}_tools.sample import (
    SAMPLE_KEYS,
    make_events,
    malformed_values,
    sample_keys,
    spark_filter,
)


def test_sample_keys_add_the_filters_literals_of_the_keys_type() -> None:
    assert sample_keys("string", "kind NOT IN ('test', 'it''s')")[-2:] == ["test", "it's"]
    assert sample_keys("string", f"key != '{SAMPLE_KEYS[3]}'") == SAMPLE_KEYS  # already there
    assert sample_keys("int", "size > 12 AND size != 3") == [*range(1, 9), 12]


@pytest.mark.parametrize(
    ("filter_expression", "schema", "python"),
    [
        ("kind NOT IN ('test', 'internal')", {"kind": "string"}, lambda e: e["kind"] not in ("test", "internal")),
        ("CAST(size AS INT) > 3 AND kind ILIKE 'B%'", {"kind": "string", "size": "int"},
         lambda e: e["size"] > 3 and e["kind"].lower().startswith("b")),
        ("CASE WHEN flag THEN kind = 'test' ELSE kind != 'red' END", {"kind": "string", "flag": "bool"},
         lambda e: e["kind"] == "test" if e["flag"] else e["kind"] != "red"),
    ],
)
def test_the_kept_events_are_those_the_filter_keeps(spark, filter_expression, schema, python) -> None:
    keys = sample_keys("string", filter_expression)
    sample = make_events(600, 3, schema, "kind", spark_filter(spark, filter_expression, schema),
                         malformed_rate=0.05, keys=keys)

    # The same filter written in Python, event by event.
    events = [json.loads(value) for value in sample.values if value not in sample.malformed_values]
    expected = [event for event in events if python(event)]
    assert sample.kept_events == expected
    assert 0 < len(expected) < len(events)  # both sides of the filter


def test_malformed_values_name_the_configured_key_field() -> None:
    values = malformed_values("kind")
    assert b'{"not_kind": 3}' in values and b'{"kind": {"nested": 1}}' in values
