"""The answer's column names (pipeline/query.py's) share the changes with the sink's own columns:
a name the sink uses, or two alike, is refused when the query is built, in one line naming it,
before the output could lose a column."""

from __future__ import annotations

import pytest
{%- if cookiecutter.query == "stateless" %}
from pyspark.sql import functions as F
{%- endif %}

{% if cookiecutter.query == "count-by-key" -%}
from {{ cookiecutter.package_name }}.config import JobConfig
from {{ cookiecutter.package_name }}.failures import AnswerNameClash, AnswerNotMergeable, Outcome, verdict
from {{ cookiecutter.package_name }}.pipeline import aggregates as agg
{% else -%}
from {{ cookiecutter.package_name }}.failures import AnswerNameClash, Outcome, verdict
{% endif -%}
from {{ cookiecutter.package_name }}.pipeline.changes import checked_answer_names
{%- if cookiecutter.query == "stateless" %}
from {{ cookiecutter.package_name }}.pipeline.parsing import EventSchema, parse_records
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
    assert verdict(refused.value).outcome is Outcome.CANNOT_CONTINUE  # the code must change: no restart helps
{%- if cookiecutter.query == "count-by-key" %}


def test_the_answer_is_refused_at_start_naming_a_clashing_aggregate():
    """Before Spark runs (aggregates.checked, which the start calls): an aggregate's name, or the
    name of a state column it keeps, that the sink or another aggregate uses."""
    config = JobConfig(key_field="color", schema={"color": "string", "amount": "int"})
    with pytest.raises(AnswerNameClash, match=r"'key' is a name the sink's changes use"):
        agg.checked([agg.Count("key")], config)
    with pytest.raises(AnswerNotMergeable, match=r"keeps its state as 'mean_sum', a name another aggregate"):
        agg.checked([agg.Mean("amount", "mean"), agg.Sum("amount", "mean_sum")], config)
    assert agg.checked([agg.Count("count"), agg.Mean("amount", "mean")], config).names == ["count", "mean"]
{%- elif cookiecutter.query == "stateless" %}


def test_the_query_refuses_a_clashing_answer_when_it_is_built(spark):
    """Through the shape's own operator, before any batch runs."""
    schema = EventSchema(fields={"color": "string"}, key_field="color", max_record_bytes=1000)
    records = spark.createDataFrame([("events", 0, 0, b'{"color": "red"}')],
                                    "topic STRING, partition INT, offset BIGINT, value BINARY")
    events = parse_records(records, schema)
    clashing, fine = [F.col("color").alias("kind")], [F.col("color").alias("colour")]
    with pytest.raises(AnswerNameClash, match=r"'kind' is a name the sink's changes use"):
        changes(events, "color", clashing)
    assert changes(events, "color", fine).frame.count() == 1
{%- endif %}
