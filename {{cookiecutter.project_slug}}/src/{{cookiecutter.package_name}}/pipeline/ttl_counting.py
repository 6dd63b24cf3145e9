"""Count by key with a state TTL: a transformWithStateInPandas processor that keeps one count
per key in the RocksDB state store, forgets a key idle for `state_ttl_seconds`, and emits only
the keys whose count changed in the batch. Chosen by counting.py when a TTL is set.

Dead letters travel through the same operator (grouped under the null key) so that they
reach the sink in the same batch, and so in the same Kafka transaction, as the counts. Unlike
Spark's aggregation (counting.py), this operator is grouped by the key alone: with a second
grouping column that is null for every good event, transformWithStateInPandas called the
processor once per row, and each key's count was published once per event."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

from .changes import CHANGES_SCHEMA, GROUP_KEY, INPUT_COLUMNS, KIND_ANSWER, KIND_DEAD_LETTER
from .dead_letters import DEAD_LETTER_KEY, DEAD_LETTER_VALUE

_OUTPUT_COLUMNS = ["kind", "key", "count", DEAD_LETTER_VALUE]


def count_with_ttl(keyed: DataFrame, ttl_seconds: int, seed: DataFrame | None = None) -> DataFrame:
    """Changes (changes.CHANGES_SCHEMA) from records (changes.INPUT_COLUMNS); `seed`: a
    savepoint's counts (key, count), the initial state Spark hands the first batch."""
    initial = None if seed is None else seed.select(F.col("key").alias(GROUP_KEY), "count").groupBy(GROUP_KEY)
    return keyed.select(*INPUT_COLUMNS).groupBy(GROUP_KEY).transformWithStateInPandas(
        statefulProcessor=CountProcessor(ttl_seconds),
        outputStructType=CHANGES_SCHEMA,
        outputMode="Append",
        timeMode="ProcessingTime",
        initialState=initial,
    )


class CountProcessor(StatefulProcessor):
    def __init__(self, ttl_seconds: int = 0) -> None:
        self.ttl_ms = ttl_seconds * 1000 if ttl_seconds > 0 else None

    def init(self, handle: StatefulProcessorHandle) -> None:
        # With a TTL, a key idle for that long starts again from zero.
        self.count = handle.getValueState("count", "count BIGINT", self.ttl_ms)

    def handleInitialState(self, key: tuple, initialState: pd.DataFrame, timerValues: TimerValues) -> None:
        # A savepoint's count (one row per key), not published: only events change what is.
        # Its TTL starts again now.
        self.count.update((int(initialState["count"].iloc[0]),))

    def handleInputRows(
        self, key: tuple, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        (group_key,) = key
        if group_key is None:
            yield from dead_letter_frames(rows)
            return
        stored = self.count.get() if self.count.exists() else None
        previous = stored[0] if stored is not None else 0
        total = previous + sum(len(frame) for frame in rows)
        self.count.update((total,))
        yield count_frame(group_key, total)

    def close(self) -> None:
        pass


def count_frame(key: str, count: int) -> pd.DataFrame:
    return pd.DataFrame({"kind": [KIND_ANSWER], "key": [key], "count": [count], DEAD_LETTER_VALUE: [None]})


def dead_letter_frames(rows: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for frame in rows:
        yield pd.DataFrame({
            "kind": KIND_DEAD_LETTER,
            "key": frame[DEAD_LETTER_KEY].to_numpy(),
            "count": pd.array([None] * len(frame), dtype="Int64"),
            DEAD_LETTER_VALUE: frame[DEAD_LETTER_VALUE].to_numpy(),
        })[_OUTPUT_COLUMNS]
