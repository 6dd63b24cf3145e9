"""Count by key: the job's stateful step. What leaves it is a stream of *changes*: one row per
key whose count changed in the batch (its new total), plus the batch's dead letters, which ride
in the same micro-batch and so reach the same Kafka transaction as the counts.

Two operators, chosen by `state_ttl_seconds` (measured with `bench --scaling` and
`bench.stages`, see the README):
- without a TTL (the default): Spark's own streaming aggregation, `groupBy(key).count()` in
  Update mode with RocksDB state. Counting and state stay in the JVM: microseconds per key.
- with a TTL: transformWithStateInPandas (ttl_counting.py), the operator that has state TTL.
  It calls Python once per key, about half a millisecond per key and batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .dead_letters import DEAD_LETTER_KEY, DEAD_LETTER_VALUE, with_dead_letter_record
from .parsing import REASON
from .plan_barriers import rows_where

KIND_COUNT = "count"
KIND_DEAD_LETTER = "dead_letter"
GROUP_KEY = "group_key"
# A dead letter's group (null for a good event): dead letters are grouped, and so shuffled, by
# a hash of their source coordinates instead of all landing in the one task of the null key. A
# count of dead letters per group is the only state they keep: DEAD_LETTER_GROUPS rows at most.
DEAD_LETTER_GROUP = "dead_letter_group"
DEAD_LETTER_GROUPS = 64
GROUPING = [GROUP_KEY, DEAD_LETTER_GROUP]
# Per record: the key of a good event, or a dead letter's group, Kafka key and value; the others null.
INPUT_COLUMNS = [GROUP_KEY, DEAD_LETTER_GROUP, DEAD_LETTER_KEY, DEAD_LETTER_VALUE]
# Per change: a count (kind, key, count) or a dead letter (kind, key, dead_letter_value).
CHANGES_SCHEMA = "kind STRING, key STRING, count BIGINT, dead_letter_value STRING"


@dataclass(frozen=True)
class Changes:
    frame: DataFrame
    output_mode: str  # what the operator needs of the streaming writer


def keyed_records(events: DataFrame, key_field: str) -> DataFrame:
    """Only what the count needs: the key of a good event, or a dead letter's group and record.
    The group is a function of the record's source coordinates, so a re-run keeps it."""
    good = F.col(REASON).isNull()
    dead_letter_group = F.pmod(F.xxhash64(DEAD_LETTER_KEY), F.lit(DEAD_LETTER_GROUPS)).cast("int")
    return with_dead_letter_record(events).select(
        F.when(good, F.col(key_field).cast("string")).alias(GROUP_KEY),
        F.when(~good, dead_letter_group).alias(DEAD_LETTER_GROUP), DEAD_LETTER_KEY, DEAD_LETTER_VALUE)


def count_changes(events: DataFrame, key_field: str, partitions: int, ttl_seconds: int = 0) -> Changes:
    keyed = keyed_records(events, key_field)
    if ttl_seconds > 0:
        from .ttl_counting import count_with_ttl

        return Changes(count_with_ttl(keyed, ttl_seconds), "append")
    return Changes(_count_in_jvm(keyed, partitions), "update")


def _count_in_jvm(keyed: DataFrame, partitions: int) -> DataFrame:
    """Counts and dead letters from one read of the source: both branches start from the same
    shuffle, which Spark then runs once (ReusedExchange in the plan) instead of reading and
    parsing the batch twice. For that the two exchanges must be identical, hence the count of
    a coalesce over every column (Spark would otherwise prune the dead-letter columns from the
    count's side) and no filter before the split (Spark would push it under the shuffle).

    The shuffle is by (key, dead-letter group): Spark's hash skips nulls, so a good event goes
    where its key alone would, and dead letters spread over every partition. A null key's row
    counts its group's dead letters so far; the output encoding drops it."""
    shuffled = keyed.repartition(partitions, *(F.col(c) for c in GROUPING))
    every_row = F.coalesce(*(F.col(c).cast("string") for c in INPUT_COLUMNS))  # never null: counts each record
    counts = shuffled.groupBy(*GROUPING).agg(F.count(every_row).alias("count")).select(
        F.lit(KIND_COUNT).alias("kind"), F.col(GROUP_KEY).alias("key"), "count",
        F.lit(None).cast("string").alias(DEAD_LETTER_VALUE))
    dead_letters = shuffled.select(F.inline(rows_where(
        F.col(GROUP_KEY).isNull(),
        F.lit(KIND_DEAD_LETTER).alias("kind"), F.col(DEAD_LETTER_KEY).alias("key"),
        F.lit(None).cast("bigint").alias("count"), F.col(DEAD_LETTER_VALUE).alias(DEAD_LETTER_VALUE))))
    return counts.unionByName(dead_letters)

