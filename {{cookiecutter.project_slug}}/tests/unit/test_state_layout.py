"""A checkpoint whose state another version of the query wrote is refused in one line naming
checkpoint_location, not restarted: a real Spark refusal, from a file source (no Kafka), judged
by the error condition Spark's exception carries (failures.verdict)."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import StreamingQueryException

from {{ cookiecutter.package_name }}.failures import Outcome, verdict


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
    refused = verdict(failure.value)
    assert refused.outcome is Outcome.FIX_SETTING and refused.option == "checkpoint_location", refused
    assert "another version of the query" in refused.message, refused
    assert "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE" in refused.message, refused


def test_other_failures_are_left_to_the_restart_strategy():
    assert verdict(RuntimeError("[KAFKA_DATA_LOSS] Some data may have been lost")).outcome is Outcome.RETRY
