"""Count-by-key state: a `transformWithStateInPandas` processor that keeps one count per
key in the RocksDB state store and emits only the keys whose count changed in the batch.

Dead letters travel through the same operator (grouped under the null key) so that they
reach the sink in the same batch, and so in the same Kafka transaction, as the counts."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

KIND_COUNT = "count"
KIND_DEAD_LETTER = "dead_letter"
GROUP_KEY = "group_key"
# What the processor reads: the key of a good event, the details of a dead letter.
INPUT_COLUMNS = [GROUP_KEY, "dead_letter_reason", "topic", "partition", "offset", "raw_value"]
DEAD_LETTER_COLUMNS = ["reason", "source_topic", "source_partition", "source_offset", "raw_value"]
OUTPUT_SCHEMA = (
    "kind STRING, key STRING, count BIGINT, reason STRING, source_topic STRING, "
    "source_partition INT, source_offset BIGINT, raw_value BINARY"
)
_OUTPUT_COLUMNS = ["kind", "key", "count", *DEAD_LETTER_COLUMNS]


class CountProcessor(StatefulProcessor):
    def __init__(self, ttl_seconds: int = 0) -> None:
        self.ttl_ms = ttl_seconds * 1000 if ttl_seconds > 0 else None

    def init(self, handle: StatefulProcessorHandle) -> None:
        # With a TTL, a key idle for that long starts again from zero.
        self.count = handle.getValueState("count", "count BIGINT", self.ttl_ms)

    def handleInputRows(
        self, key: tuple, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        (group_key,) = key
        if group_key is None:
            yield from dead_letter_frames(rows)
            return
        previous = self.count.get()[0] if self.count.exists() else 0
        total = previous + sum(len(frame) for frame in rows)
        self.count.update((total,))
        yield count_frame(group_key, total)

    def close(self) -> None:
        pass


def count_frame(key: str, count: int) -> pd.DataFrame:
    return pd.DataFrame({
        "kind": [KIND_COUNT], "key": [key], "count": [count], "reason": [None], "source_topic": [None],
        "source_partition": pd.array([None], dtype="Int32"), "source_offset": pd.array([None], dtype="Int64"),
        "raw_value": [None],
    })


def dead_letter_frames(rows: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for frame in rows:
        out = pd.DataFrame({
            "kind": KIND_DEAD_LETTER,
            "key": None,
            "count": pd.array([None] * len(frame), dtype="Int64"),
            "reason": frame["dead_letter_reason"].to_numpy(),
            "source_topic": frame["topic"].to_numpy(),
            "source_partition": frame["partition"].astype("Int32").to_numpy(),
            "source_offset": frame["offset"].astype("Int64").to_numpy(),
            "raw_value": frame["raw_value"].to_numpy(),
        })
        yield out[_OUTPUT_COLUMNS]
