"""A checkpoint whose state another version of the count wrote is refused in one line naming
checkpoint_location, not restarted: a real Spark refusal, from a file source (no Kafka)."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import StreamingQueryException

from {{ cookiecutter.package_name }}.runtime.runner import state_layout_refused


def _run_count(spark, source, checkpoint, *keys: str) -> None:
    events = spark.readStream.schema("a STRING, b INT").json(str(source))
    query = (events.groupBy(*keys).count().writeStream.format("noop").outputMode("update")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()


def test_a_checkpoint_of_another_state_layout_is_refused_naming_the_option(spark, tmp_path):
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()
    (source / "1.json").write_text(json.dumps({"a": "x", "b": 1}))
    _run_count(spark, source, checkpoint, "a")  # the older layout: one grouping column
    (source / "2.json").write_text(json.dumps({"a": "y", "b": 2}))
    with pytest.raises(StreamingQueryException) as failure:
        _run_count(spark, source, checkpoint, "a", "b")
    refused = state_layout_refused(failure.value)
    assert refused is not None and refused.option == "checkpoint_location"
    assert "another version of the count" in str(refused) and "key schema" in str(refused)


def test_other_failures_are_left_to_the_restart_strategy():
    assert state_layout_refused(RuntimeError("[KAFKA_DATA_LOSS] Some data may have been lost")) is None
