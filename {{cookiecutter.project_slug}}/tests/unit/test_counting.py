"""The count and the output records, run by a local Spark on a batch of parsed events (no Kafka):
what the streaming query computes per micro-batch."""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from {{ cookiecutter.package_name }}.counting import count_changes
from {{ cookiecutter.package_name }}.output_records import encode, for_batch
from {{ cookiecutter.package_name }}.parsing import EventSchema, parse_records

SCHEMA = EventSchema(fields={"color": "string"}, key_field="color", max_record_bytes=1000)
RECORDS_DDL = "topic STRING, partition INT, offset BIGINT, value BINARY"
VALUES = [b'{"color": "red"}', b"oops", b'{"color": "blue"}', b'{"color": "red"}', b"[1]"]


def changes(spark):
    records = spark.createDataFrame([("events", 0, i, v) for i, v in enumerate(VALUES)], RECORDS_DDL)
    return count_changes(parse_records(records, SCHEMA), "color", partitions=2)


def test_counts_per_key_and_every_dead_letter(spark):
    result = changes(spark)
    assert result.output_mode == "update"
    rows = [row.asDict() for row in result.frame.collect()]
    counts = {r["key"]: r["count"] for r in rows if r["kind"] == "count" and r["key"] is not None}
    assert counts == {"red": 2, "blue": 1}
    # The null key's rows count the dead letters, one row per dead-letter group.
    assert sum(r["count"] for r in rows if r["kind"] == "count" and r["key"] is None) == 2
    assert sorted(r["key"] for r in rows if r["kind"] == "dead_letter") == ["events/0/1", "events/0/4"]


def test_dead_letters_spread_over_partitions_and_keys_stay_where_their_hash_puts_them(spark):
    """A batch of dead letters is not one task's work; a key's partition is still Spark's hash of
    the key alone, as it was before dead letters had groups (the state key schema did change, so
    an older checkpoint is refused: test_state_layout.py)."""
    values = [b"oops"] * 200 + [json.dumps({"color": f"c{i}"}).encode() for i in range(50)]
    records = spark.createDataFrame([("events", 0, i, v) for i, v in enumerate(values)], RECORDS_DDL)
    frame = count_changes(parse_records(records, SCHEMA), "color", partitions=4).frame
    rows = frame.select("kind", "key", F.spark_partition_id().alias("part"), F.hash("key").alias("h")).collect()
    dead_letter_partitions = {r["part"] for r in rows if r["kind"] == "dead_letter"}
    assert len(dead_letter_partitions) == 4, dead_letter_partitions  # union: after the counts' 4 partitions
    keyed = [r for r in rows if r["kind"] == "count" and r["key"] is not None]
    assert len(keyed) == 50 and all(r["part"] == r["h"] % 4 for r in keyed)


def test_the_batch_is_read_and_parsed_once(spark):
    """Counts and dead letters share one shuffle; without the reuse Spark reads the source twice."""
    plan = changes(spark).frame._jdf.queryExecution().executedPlan().toString()
    assert "ReusedExchange" in plan, plan


def test_the_streaming_encoding_keeps_the_shared_shuffle(spark):
    """The encoding runs in the streaming query; nothing in it may split the shared shuffle."""
    plan = encode(changes(spark).frame, "counts", "dead")._jdf.queryExecution().executedPlan().toString()
    assert "ReusedExchange" in plan, plan


def test_output_records_are_final_kafka_bytes(spark):
    records = for_batch(encode(changes(spark).frame, "counts", "dead"), 7).collect()
    by_topic: dict[str, list] = {}
    for record in records:
        by_topic.setdefault(record["topic"], []).append((bytes(record["key"]), json.loads(bytes(record["value"]))))
    assert sorted(by_topic["counts"]) == [(b"blue", {"key": "blue", "count": 1, "batch_id": 7}),
                                          (b"red", {"key": "red", "count": 2, "batch_id": 7})]
    dead = dict(by_topic["dead"])
    assert set(dead) == {b"events/0/1", b"events/0/4"}
    assert dead[b"events/0/1"]["reason"].startswith("not JSON") and dead[b"events/0/1"]["batch_id"] == 7
    assert list(dead[b"events/0/4"])[-1] == "batch_id" and dead[b"events/0/4"]["source_offset"] == 4
