"""The answer's column names (pipeline/query.py's) share the changes with the sink's own columns:
a name the sink uses, or two alike, is refused when the query is built, in one line naming it,
before the output could lose a column."""

from __future__ import annotations

import pytest
{%- if cookiecutter.query != "windowed-count" %}
from pyspark.sql import functions as F
{%- endif %}

from {{ cookiecutter.package_name }}.failures import AnswerNameClash, Outcome, verdict
from {{ cookiecutter.package_name }}.pipeline.changes import checked_answer_names
{%- if cookiecutter.query == "count-by-key" %}
from {{ cookiecutter.package_name }}.pipeline.counting import aggregate_changes as changes
{%- endif %}
{%- if cookiecutter.query != "windowed-count" %}
from {{ cookiecutter.package_name }}.pipeline.parsing import EventSchema, parse_records
{%- endif %}
{%- if cookiecutter.query == "stateless" %}
from {{ cookiecutter.package_name }}.pipeline.projection import project_changes as changes
{%- endif %}


def test_the_answers_own_names_pass():
    assert checked_answer_names(["count", "total", "mean_amount"]) == ["count", "total", "mean_amount"]


@pytest.mark.parametrize("names, named", [
    (["kind"], "'kind' is a name the sink's changes use"),
    (["count", "Key"], "'Key' is a name the sink's changes use"),
    (["dead_letter_value"], "'dead_letter_value' is a name"),
    (["headers"], "'headers' is a name"),
    (["group_key"], "'group_key' is a name"),
    (["total", "Total"], "two of the answer's columns are named 'total'"),
])
def test_a_clash_is_refused_naming_the_column(names, named):
    with pytest.raises(AnswerNameClash, match=r"^pipeline/query\.py: ") as refused:
        checked_answer_names(names)
    assert named in str(refused.value) and "\n" not in str(refused.value)
    assert verdict(refused.value).outcome is Outcome.HALT  # the code must change: no restart helps
{%- if cookiecutter.query != "windowed-count" %}


def test_the_query_refuses_a_clashing_answer_when_it_is_built(spark):
    """Through the shape's own operator, before any batch runs."""
    schema = EventSchema(fields={"color": "string"}, key_field="color", max_record_bytes=1000)
    records = spark.createDataFrame([("events", 0, 0, b'{"color": "red"}')],
                                    "topic STRING, partition INT, offset BIGINT, value BINARY")
    events = parse_records(records, schema)
{%- if cookiecutter.query == "stateless" %}
    clashing, fine = [F.col("color").alias("kind")], [F.col("color").alias("colour")]
{%- else %}
    clashing, fine = [F.count(F.lit(1)).alias("key")], [F.count(F.lit(1)).alias("count")]
{%- endif %}
    with pytest.raises(AnswerNameClash, match=r"'(kind|key)' is a name the sink's changes use"):
        changes(events, "color", clashing)
    assert changes(events, "color", fine).frame.count() == 1
{%- endif %}
