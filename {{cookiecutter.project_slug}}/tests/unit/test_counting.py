"""The answer (by default the count) and the output records, run by a local Spark on a batch of
parsed events (no Kafka): what the streaming query computes per micro-batch."""

from __future__ import annotations

import base64
import json

import pyarrow as pa
from pyspark.sql import functions as F

from {{ cookiecutter.package_name }}.config import JobConfig
from {{ cookiecutter.package_name }}.pipeline import aggregates as agg
from {{ cookiecutter.package_name }}.pipeline.changes import KIND_ANSWER, KIND_DEAD_LETTERS_IN_PARTITION
from {{ cookiecutter.package_name }}.pipeline.counting import aggregate_changes
from {{ cookiecutter.package_name }}.pipeline.output_records import encode
from {{ cookiecutter.package_name }}.pipeline.parsing import EventSchema, parse_records
from {{ cookiecutter.package_name }}.sink.batch_records import with_batch_id

SCHEMA = EventSchema(fields={"color": "string"}, key_field="color", max_record_bytes=1000)
RECORDS_DDL = "topic STRING, partition INT, offset BIGINT, value BINARY"
VALUES = [b'{"color": "red"}', b"oops", b'{"color": "blue"}', b'{"color": "red"}', b"[1]"]


def answer_of(schema: EventSchema, *aggregates: agg.Aggregate) -> agg.Answer:
    return agg.checked(aggregates, JobConfig(key_field=schema.key_field, schema=dict(schema.fields)))


def count():
    return answer_of(SCHEMA, agg.Count("count"))  # query.answer's default


def published(records, batch_id):
    """(topic, key, value as JSON or None) of each record as the sink publishes it in batch
    `batch_id`: its value stamped with the batch id (with_batch_id)."""
    rows = records.collect()
    values = with_batch_id(pa.array([row["value"] and bytes(row["value"]) for row in rows], pa.binary()), batch_id)
    return [(row["topic"], bytes(row["key"]), value and json.loads(value))
            for row, value in zip(rows, values.to_pylist(), strict=True)]


def changes(spark, schema=SCHEMA, values=VALUES, answer=None):
    records = spark.createDataFrame([("events", 0, i, v) for i, v in enumerate(values)], RECORDS_DDL)
    return aggregate_changes(parse_records(records, schema), "color", answer or count())


def test_counts_per_key_and_dead_letters_per_input_partition(spark):
    result = changes(spark)
    assert result.output_mode == "update" and not result.dead_letters_inline
    rows = [row.asDict() for row in result.frame.collect()]
    assert {r["key"]: r["count"] for r in rows if r["kind"] == KIND_ANSWER} == {"red": 2, "blue": 1}
    # Partition 0 had the two dead letters: a change that the sink turns into a read-back.
    assert [(r["key"], r["count"]) for r in rows if r["kind"] == KIND_DEAD_LETTERS_IN_PARTITION] == [("0", 2)]


def test_only_partial_aggregates_cross_the_shuffle(spark):
    """Spark aggregates each task's rows before the exchange (a partial HashAggregate under it):
    the shuffle carries a task's distinct keys, not every record."""
    plan = changes(spark).frame._jdf.queryExecution().executedPlan().toString()
    exchange = plan.index("Exchange hashpartitioning")
    assert "HashAggregate" in plan[exchange:] and "partial_count" in plan[exchange:], plan


def test_keys_stay_where_their_hash_puts_them(spark):
    """A key's state partition is Spark's hash of the key alone (the null dead-letter group
    column does not move it), as in every earlier layout of the count."""
    values = [b"oops"] * 20 + [json.dumps({"color": f"c{i}"}).encode() for i in range(50)]
    records = spark.createDataFrame([("events", 0, i, v) for i, v in enumerate(values)], RECORDS_DDL)
    frame = aggregate_changes(parse_records(records, SCHEMA), "color", count()).frame
    rows = frame.select("kind", "key", F.spark_partition_id().alias("part"), F.hash("key").alias("h")).collect()
    keyed = [r for r in rows if r["kind"] == KIND_ANSWER]
    assert len(keyed) == 50 and all(r["part"] == r["h"] % 2 for r in keyed)


def test_output_records_are_final_kafka_bytes(spark):
    by_topic: dict[str | None, list] = {}
    for topic, key, value in published(encode(changes(spark).frame, "counts", "dead"), 7):
        by_topic.setdefault(topic, []).append((key, value))
    assert sorted(by_topic["counts"]) == [(b"blue", {"key": "blue", "count": 1, "batch_id": 7}),
                                          (b"red", {"key": "red", "count": 2, "batch_id": 7})]
    # Partition 0's dead letters, as a read-back request for the sink.
    assert by_topic[None] == [(b"0", None)] and "dead" not in by_topic


def test_routed_answers_reach_their_routes_topics_and_an_answer_without_one_is_a_dead_letter(spark):
    """query.route over an answer's fields names its route, `[routes]` maps the route to a topic:
    an answer whose route is not there is a dead letter that says so (never a topic made on the
    fly), its value kept in base64; the read-back request is not routed."""
    values = [*VALUES, b'{"color": "green"}']
    route = F.expr("CASE WHEN key = 'red' THEN 'warm' WHEN count > 0 AND key = 'green' THEN 'elsewhere' END")
    records = published(encode(changes(spark, values=values).frame, "counts", "dead", route=route,
                               routes={"warm": "counts-warm", "cold": "counts-cold"}), 3)
    by_topic: dict[str | None, list] = {}
    for topic, key, value in records:
        by_topic.setdefault(topic, []).append((key, value))
    assert by_topic["counts-warm"] == [(b"red", {"key": "red", "count": 2, "batch_id": 3})]
    assert "counts" not in by_topic and "counts-cold" not in by_topic and by_topic[None] == [(b"0", None)]
    letters = {key: value for key, value in by_topic["dead"]}
    assert {key: (value["reason"], value["route"]) for key, value in letters.items()} == {
        b"blue": ("no route (null) is not in [routes]", None),
        b"green": ("route 'elsewhere' is not in [routes]", "elsewhere")}
    assert json.loads(base64.b64decode(letters[b"green"]["value_base64"])) == {"key": "green", "count": 1}
    assert letters[b"green"]["batch_id"] == 3 and letters[b"green"]["key"] == "green"


def test_any_named_aggregates_are_the_answer_the_output_records_carry(spark):
    """The query's answer is its own (query.answer): a sum and a maximum here. The dead letters'
    rows, whose fields are null, still say which partition had dead letters."""
    schema = EventSchema(fields={"color": "string", "amount": "int"}, key_field="color", max_record_bytes=1000)
    values = [b'{"color": "red", "amount": 3}', b"oops", b'{"color": "blue", "amount": 0}',
              b'{"color": "red", "amount": 4}']
    answer = answer_of(schema, agg.Sum("amount", "total"), agg.Max("amount", "largest"), agg.Mean("amount", "mean"))
    records = published(encode(changes(spark, schema, values, answer).frame, "sums", "dead"), 2)
    assert {key: value for topic, key, value in records if topic == "sums"} == {
        b"red": {"key": "red", "total": 7, "largest": 4, "mean": 3.5, "batch_id": 2},
        b"blue": {"key": "blue", "total": 0, "largest": 0, "mean": 0.0, "batch_id": 2}}
    assert [key for topic, key, _ in records if topic is None] == [b"0"]


def test_a_seeded_answer_merges_each_state_column_its_own_way_and_publishes_only_keys_with_events(spark):
    """A savepoint's seed is a partial state of its key (counting._aggregate_in_jvm_seeded): summed
    for a count, a sum and a mean's two columns, the least and the greatest for a minimum and a
    maximum. A seeded key without events is not published."""
    schema = EventSchema(fields={"color": "string", "amount": "int"}, key_field="color", max_record_bytes=1000)
    answer = answer_of(schema, agg.Count("count"), agg.Min("amount", "smallest"), agg.Max("amount", "largest"),
                       agg.Mean("amount", "mean"))
    seed = spark.createDataFrame([("red", 2, 1, 9, 10.0, 2), ("green", 5, 2, 2, 10.0, 5)],
                                 f"key STRING, {answer.state_ddl()}")
    values = [b'{"color": "red", "amount": 3}', b'{"color": "red", "amount": 0}', b'{"color": "blue", "amount": 4}']
    records = spark.createDataFrame([("events", 0, i, v) for i, v in enumerate(values)], RECORDS_DDL)
    frame = aggregate_changes(parse_records(records, schema), "color", answer, seed=seed).frame
    assert {row["key"]: (row["count"], row["smallest"], row["largest"], row["mean"])
            for row in frame.collect() if row["kind"] == KIND_ANSWER} == {
        "red": (4, 0, 9, 13.0 / 4), "blue": (1, 4, 4, 4.0)}


def test_read_back_dead_letters_are_final_kafka_bytes(spark, tmp_path):
    """What the sink publishes for a read-back request: the dead letters of the batch's range, parsed by
    the same expressions as the stream, keyed by their coordinates, with the batch id."""
    from {{ cookiecutter.package_name }}.pipeline.dead_letter_readback import dead_letters
    from {{ cookiecutter.package_name }}.pipeline.parsing import SOURCE_COLUMNS

    records = spark.createDataFrame([("events", 0, i, v) for i, v in enumerate(VALUES)], RECORDS_DDL)
    dead = {key: value for _, key, value in published(dead_letters(records.select(*SOURCE_COLUMNS, "value"), SCHEMA,
                                                                    "dead"), 7)}
    assert set(dead) == {b"events/0/1", b"events/0/4"}
    assert dead[b"events/0/1"]["reason"].startswith("not JSON") and dead[b"events/0/1"]["batch_id"] == 7
    assert list(dead[b"events/0/4"])[-1] == "batch_id" and dead[b"events/0/4"]["source_offset"] == 4
