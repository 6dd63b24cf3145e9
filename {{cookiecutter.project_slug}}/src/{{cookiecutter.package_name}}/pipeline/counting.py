"""Count by key: the job's stateful step. What leaves it is a stream of *changes*: one row per
key whose count changed in the batch (its new total), plus what the batch's dead letters need
to reach the same Kafka transaction as the counts.

Two operators, chosen by `state_ttl_seconds` (docs/testing.md's Benchmarks compare them):
- without a TTL (the default): Spark's own streaming aggregation, `groupBy(key).count()` in
  Update mode with RocksDB state, aggregated partially before the shuffle (only a task's
  distinct keys cross it). Dead letters are counted per input partition in the same
  aggregation: a batch's change row for partition P says "partition P had dead letters in this
  batch", and the sink reads them back from the batch's offset range (dead_letter_readback.py)
  instead of carrying every record through the shuffle.
- with a TTL: transformWithStateInPandas (ttl_counting.py), the operator that has state TTL.
  It calls Python once per key, about half a millisecond per key and batch; dead letters travel
  through it, grouped under the null key.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .changes import (
    DEAD_LETTER_GROUP,
    GROUP_KEY,
    GROUPING,
    KIND_ANSWER,
    KIND_DEAD_LETTERS_IN_PARTITION,
    Changes,
    checked_answer_names,
)
from .dead_letters import DEAD_LETTER_KEY, DEAD_LETTER_VALUE, with_dead_letter_record
from .parsing import IS_EVENT, REASON

# What only dead letters that travel through the operator (the TTL operator's) are built from.
DEAD_LETTER_SOURCE_COLUMNS = (REASON, "topic", "offset", "raw_value")


def columns_read(parsed_columns: list[str], ttl_seconds: int) -> list[str]:
    """The parsed columns the count reads (the job's filter may read any field). Spark's
    aggregation counts dead letters per partition: their reasons and records stay out of the
    query, and out of the code Spark generates for every batch."""
    if ttl_seconds > 0:
        return parsed_columns
    return [name for name in parsed_columns if name not in DEAD_LETTER_SOURCE_COLUMNS]


def keyed_records(events: DataFrame, key_field: str) -> DataFrame:
    """What the TTL operator needs: the key of a good event, or a dead letter's group and record."""
    good = F.col(IS_EVENT)
    return with_dead_letter_record(events).select(
        F.when(good, F.col(key_field).cast("string")).alias(GROUP_KEY),
        F.when(~good, F.col("partition")).alias(DEAD_LETTER_GROUP), DEAD_LETTER_KEY, DEAD_LETTER_VALUE)


def aggregate_changes(events: DataFrame, key_field: str, answer: list[Column], ttl_seconds: int = 0,
                      seed: DataFrame | None = None) -> Changes:
    """`answer`: the query's named aggregates (query.answer). `seed`: a savepoint's counts (key,
    count): a one-shot stream for Spark's aggregation, a batch DataFrame for the TTL operator's
    initial state (job.savepoint_seed); or None. The TTL operator and a seed know one answer, the
    count: preflight refuses them for any other (fingerprint.counts_events)."""
    if ttl_seconds > 0:
        from .ttl_counting import count_with_ttl

        frame = count_with_ttl(keyed_records(events, key_field), ttl_seconds, seed)
        return Changes(frame, "append", dead_letters_inline=True)
    if seed is not None:
        return Changes(_count_in_jvm_seeded(events, key_field, seed), "update", dead_letters_inline=False)
    return Changes(_aggregate_in_jvm(events, key_field, answer), "update", dead_letters_inline=False)


def _keyed(events: DataFrame, key_field: str) -> DataFrame:
    """The grouping columns, and every column the answer may read."""
    good = F.col(IS_EVENT)
    return events.select(F.when(good, F.col(key_field).cast("string")).alias(GROUP_KEY),
                         F.when(~good, F.col("partition")).alias(DEAD_LETTER_GROUP), "*")


def _changes(aggregated: DataFrame, answer_names: list[str]) -> DataFrame:
    is_answer = F.col(GROUP_KEY).isNotNull()
    return aggregated.select(
        F.when(is_answer, F.lit(KIND_ANSWER)).otherwise(F.lit(KIND_DEAD_LETTERS_IN_PARTITION)).alias("kind"),
        F.coalesce(F.col(GROUP_KEY), F.col(DEAD_LETTER_GROUP).cast("string")).alias("key"),
        *answer_names, F.lit(None).cast("string").alias(DEAD_LETTER_VALUE))


def _aggregate_in_jvm(events: DataFrame, key_field: str, answer: list[Column]) -> DataFrame:
    """Good events by key, dead letters by input partition, one aggregation. Spark's hash skips
    nulls, so a good event's state lives where its key alone would put it."""
    aggregated = _keyed(events, key_field).groupBy(*GROUPING).agg(*answer)
    return _changes(aggregated, checked_answer_names(aggregated.columns[len(GROUPING):]))  # the grouping first


def _count_in_jvm_seeded(events: DataFrame, key_field: str, seed: DataFrame) -> DataFrame:
    """The count, started from a savepoint's counts: each event weighs 1, each seed row its
    count, and `seeded` is the key's seed (one seed row per key: its max; its own aggregate name
    keeps the state's two values apart, see savepoints.read_state_counts). A key whose total is
    its seed had no event yet (the first batch carries every seeded key): nothing to publish."""
    events_weighted = _keyed(events, key_field).select(*GROUPING, F.lit(1).cast("bigint").alias("weight"),
                                                         F.lit(0).cast("bigint").alias("seed_weight"))
    seeds = seed.select(F.col("key").alias(GROUP_KEY), F.lit(None).cast("int").alias(DEAD_LETTER_GROUP),
                        F.col("count").alias("weight"), F.col("count").alias("seed_weight"))
    counts = events_weighted.unionByName(seeds).groupBy(*GROUPING).agg(
        F.sum("weight").alias("count"), F.max("seed_weight").alias("seeded"))
    return _changes(counts.where(F.col("count") != F.col("seeded")), ["count"])
