"""An answer per key (by default a count): the job's stateful step. What leaves it is a stream of
*changes*: one row per key whose answer changed in the batch (its new value), plus what the
batch's dead letters need to reach the same Kafka transaction as the answers. The answer is
query.answer's aggregates (aggregates.py), kept as their state columns.

Two operators, chosen by `state_ttl_seconds` (docs/testing.md's Benchmarks compare them):
- without a TTL (the default): Spark's own streaming aggregation, `groupBy(key).agg(...)` in
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

from .aggregates import Answer, Mean, StateColumn
from .changes import (
    DEAD_LETTER_GROUP,
    EVENTS_AFTER_SEED,
    GROUP_KEY,
    GROUPING,
    KIND_ANSWER,
    KIND_DEAD_LETTERS_IN_PARTITION,
    Changes,
)
from .dead_letters import DEAD_LETTER_VALUE
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


def aggregate_changes(events: DataFrame, key_field: str, answer: Answer, ttl_seconds: int = 0,
                      seed: DataFrame | None = None) -> Changes:
    """`answer`: the query's aggregates (query.answer, checked). `seed`: a savepoint's state (key and
    the answer's state columns): a one-shot stream for Spark's aggregation, a batch DataFrame for
    the TTL operator's initial state (job.savepoint_seed); or None."""
    if ttl_seconds > 0:
        from .ttl_counting import aggregate_with_ttl, keyed_records

        frame = aggregate_with_ttl(keyed_records(events, key_field, answer), answer, ttl_seconds, seed)
        return Changes(frame, "append", dead_letters_inline=True)
    if seed is not None:
        return Changes(_aggregate_in_jvm_seeded(events, key_field, answer, seed), "update", dead_letters_inline=False)
    return Changes(_aggregate_in_jvm(events, key_field, answer), "update", dead_letters_inline=False)


def _keyed(events: DataFrame, key_field: str) -> DataFrame:
    """The grouping columns, and every column the answer may read."""
    good = F.col(IS_EVENT)
    return events.select(F.when(good, F.col(key_field).cast("string")).alias(GROUP_KEY),
                         F.when(~good, F.col("partition")).alias(DEAD_LETTER_GROUP), "*")


def _published(answer: Answer) -> list[Column]:
    """Each aggregate's published value, from its state columns."""
    columns = []
    for aggregate in answer.aggregates:
        if isinstance(aggregate, Mean):
            total, values = F.col(f"`{aggregate.sum_column}`"), F.col(f"`{aggregate.values_column}`")
            columns.append(F.when(values > 0, total / values).alias(aggregate.name))  # ANSI: no division by 0
        else:
            columns.append(F.col(f"`{aggregate.name}`"))
    return columns


def _changes(aggregated: DataFrame, answer: Answer) -> DataFrame:
    is_answer = F.col(GROUP_KEY).isNotNull()
    return aggregated.select(
        F.when(is_answer, F.lit(KIND_ANSWER)).otherwise(F.lit(KIND_DEAD_LETTERS_IN_PARTITION)).alias("kind"),
        F.coalesce(F.col(GROUP_KEY), F.col(DEAD_LETTER_GROUP).cast("string")).alias("key"),
        *_published(answer), F.lit(None).cast("string").alias(DEAD_LETTER_VALUE))


def _state_aggregate(column: StateColumn) -> Column:
    """A state column as Spark's aggregate over a key's events (its buffer is the value kept)."""
    if column.merge == "rows":
        return F.count(F.lit(1)).alias(column.name)
    field = F.col(f"`{column.field}`").cast(column.type)
    if column.merge == "values":
        return F.count(field).alias(column.name)
    return {"sum": F.sum, "min": F.min, "max": F.max}[column.merge](field).alias(column.name)


def _aggregate_in_jvm(events: DataFrame, key_field: str, answer: Answer) -> DataFrame:
    """Good events by key, dead letters by input partition, one aggregation. Spark's hash skips
    nulls, so a good event's state lives where its key alone would put it."""
    aggregated = _keyed(events, key_field).groupBy(*GROUPING).agg(*map(_state_aggregate, answer.state))
    return _changes(aggregated, answer)


def _merged(column: StateColumn) -> Column:
    """A state column over rows that each hold a partial value of it (an event's or a seed's)."""
    merge = F.sum if column.merge in ("rows", "values", "sum") else {"min": F.min, "max": F.max}[column.merge]
    return merge(F.col(f"`{column.name}`")).alias(column.name)


def _event_partial(column: StateColumn) -> Column:
    """One event's partial value of a state column: what it adds to the key's."""
    if column.merge == "rows":
        return F.lit(1).cast("bigint").alias(column.name)
    field = F.col(f"`{column.field}`")
    if column.merge == "values":
        return F.when(field.isNotNull(), 1).otherwise(0).cast("bigint").alias(column.name)
    return field.cast(column.type).alias(column.name)


def _aggregate_in_jvm_seeded(events: DataFrame, key_field: str, answer: Answer, seed: DataFrame) -> DataFrame:
    """The answer, started from a savepoint's state: each event and each seed row is a partial
    state of its key, merged (aggregates.py). EVENTS_AFTER_SEED counts a key's events, not its seed:
    a key whose state is its seed alone (the first batch carries every seeded key) had no event
    yet, so nothing to publish."""
    names = [column.name for column in answer.state]
    partials = _keyed(events, key_field).select(*GROUPING, *map(_event_partial, answer.state),
                                                F.lit(1).cast("bigint").alias(EVENTS_AFTER_SEED))
    seeds = seed.select(F.col("key").alias(GROUP_KEY), F.lit(None).cast("int").alias(DEAD_LETTER_GROUP),
                        *(F.col(f"`{name}`") for name in names), F.lit(0).cast("bigint").alias(EVENTS_AFTER_SEED))
    merged = partials.unionByName(seeds).groupBy(*GROUPING).agg(
        *map(_merged, answer.state), F.sum(EVENTS_AFTER_SEED).alias(EVENTS_AFTER_SEED))
    return _changes(merged.where(F.col(EVENTS_AFTER_SEED) > 0), answer)
