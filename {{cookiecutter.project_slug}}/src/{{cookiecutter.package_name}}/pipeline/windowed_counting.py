"""Count by key per event-time tumbling window: a transformWithStateInPandas processor that keeps,
per key, a count per open window in the RocksDB state store, and emits the windows whose count
changed in the batch. A window's count is published each time it changes (an upsert per key and
window), not once when it closes: a reader sees it as soon as the batch commits, and a window
never needs a batch of its own to be published.

Late events. Spark's watermark (`withWatermark`, `allowed_lateness_seconds` behind the latest event
time of the batches before) is the batch's, recorded in `offsets/N` and so the same when a batch
runs again. An event whose window ends at or before it is late: it becomes a dead letter whose
reason starts with `late:`, in the same batch and so in the same Kafka transaction as the counts.
Spark's own window aggregation (and transformWithState in event-time mode) drops such events
without a trace; in processing-time mode they reach the processor, which decides. A window's
state is dropped once the watermark passes its end: at the key's next events, or by a timer for a
key that gets none. Any event for it from then on is late, so when the state goes does not change
what is published.

Dead letters travel through the same operator, grouped under the null key, as in ttl_counting.py."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TypeVar

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from .changes import GROUP_KEY, KIND_ANSWER, KIND_DEAD_LETTER, Changes
from .dead_letters import DEAD_LETTER_KEY, DEAD_LETTER_VALUE, MAX_DEAD_LETTER_VALUE_BYTES, with_dead_letter_record
from .parsing import IS_EVENT

EVENT_TIME_MS = "event_time_ms"
EVENT_TIME = "event_time"  # the same as a timestamp: what the watermark is computed from
_SOURCE_COLUMNS = ["topic", "partition", "offset", "raw_value"]
CHANGES_SCHEMA = "kind STRING, key STRING, window_start STRING, window_end STRING, count BIGINT, " \
                 "dead_letter_value STRING"
T = TypeVar("T", int, "pd.Series[int]")
_OUTPUT_COLUMNS = ["kind", "key", "window_start", "window_end", "count", DEAD_LETTER_VALUE]


def windowed_changes(events: DataFrame, key_field: str, event_time_field: str, window_seconds: int,
                     allowed_lateness_seconds: int) -> Changes:
    """Changes (one row per key and window whose count changed, per dead letter) from parsed events."""
    good = F.col(IS_EVENT)
    keyed = with_dead_letter_record(events).select(
        F.when(good, F.col(f"`{key_field}`").cast("string")).alias(GROUP_KEY),
        F.when(good, F.col(f"`{event_time_field}`")).alias(EVENT_TIME_MS),
        F.when(good, F.timestamp_millis(F.col(f"`{event_time_field}`"))).alias(EVENT_TIME),
        *_SOURCE_COLUMNS, DEAD_LETTER_KEY, DEAD_LETTER_VALUE)
    frame = keyed.withWatermark(EVENT_TIME, f"{int(allowed_lateness_seconds)} seconds").groupBy(GROUP_KEY) \
        .transformWithStateInPandas(statefulProcessor=WindowedCountProcessor(window_seconds * 1000),
                                    outputStructType=CHANGES_SCHEMA, outputMode="Append",
                                    timeMode="ProcessingTime")
    return Changes(frame, "append", dead_letters_inline=True)


def window_start(event_time_ms: T, window_ms: int) -> T:
    """The start of the window an event time falls in (a number, or a pandas Series of them)."""
    return event_time_ms // window_ms * window_ms


def iso_time(epoch_ms: int) -> str:
    """A window bound as the output value gives it: UTC, to the second (windows are whole seconds)."""
    return datetime.fromtimestamp(epoch_ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def window_key(key: str, start_ms: int) -> str:
    """The output record's key: the query's key and its window's start, `red@2026-11-27T10:00:00Z`."""
    return f"{key}@{iso_time(start_ms)}"


class WindowedCountProcessor(StatefulProcessor):
    """A key's open windows in one value (their starts and counts: a handful, while the watermark
    trails by `allowed_lateness_seconds`), read and written once per call. No state is iterated:
    iterating state or timers inside `handleExpiredTimer` overflowed the stack of Spark 4.2's
    stream thread (measured with `listTimers`), and one value is one read either way."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.windows = handle.getValueState("windows", "starts ARRAY<BIGINT>, counts ARRAY<BIGINT>")

    def handleInputRows(
        self, key: tuple, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        (group_key,) = key
        if group_key is None:
            yield from dead_letter_frames(rows)
            return
        watermark = timerValues.getCurrentWatermarkInMs()
        stored = self._stored()
        counts = self._open(stored, watermark)
        frame = pd.concat(list(rows), ignore_index=True)
        starts = window_start(frame[EVENT_TIME_MS].astype("int64"), self.window_ms)
        late = starts + self.window_ms <= watermark
        if late.any():
            yield late_dead_letters(frame[late], watermark, self.window_ms)
        changed = []
        for start, events in sorted(starts[~late].value_counts().items()):
            counts[int(start)] = counts.get(int(start), 0) + int(events)
            changed.append((int(start), counts[int(start)]))
        self._store(counts)
        if counts and not stored:  # the key's first open window: a timer drops it once it closes
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + self.window_ms)
        if changed:
            yield window_counts(group_key, changed, self.window_ms)

    def handleExpiredTimer(
        self, key: tuple, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        counts = self._open(self._stored(), timerValues.getCurrentWatermarkInMs())
        self._store(counts)
        if counts:  # Spark deletes the expired timer after this call: the next one, later
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + self.window_ms)
        yield from ()

    def _stored(self) -> dict[int, int]:
        value = self.windows.get() if self.windows.exists() else None
        return {} if value is None else {int(start): int(count) for start, count in zip(*value, strict=True)}

    def _open(self, counts: dict[int, int], watermark: int) -> dict[int, int]:
        """The windows the watermark has not passed."""
        return {start: count for start, count in counts.items() if start + self.window_ms > watermark}

    def _store(self, counts: dict[int, int]) -> None:
        if counts:
            self.windows.update((sorted(counts), [counts[start] for start in sorted(counts)]))
        elif self.windows.exists():
            self.windows.clear()

    def close(self) -> None:
        pass


def window_counts(key: str, changed: list[tuple[int, int]], window_ms: int) -> pd.DataFrame:
    return pd.DataFrame({
        "kind": KIND_ANSWER,
        "key": [window_key(key, start) for start, _ in changed],
        "window_start": [iso_time(start) for start, _ in changed],
        "window_end": [iso_time(start + window_ms) for start, _ in changed],
        "count": [total for _, total in changed],
        DEAD_LETTER_VALUE: None,
    })[_OUTPUT_COLUMNS]


def late_dead_letters(late: pd.DataFrame, watermark: int, window_ms: int) -> pd.DataFrame:
    """A late event's dead letter, as dead_letters.py builds the others in the JVM (the same JSON,
    field for field): keyed by its source coordinates, its raw value in base64."""
    keys, values = [], []
    for topic, partition, offset, raw, time in zip(late["topic"], late["partition"], late["offset"],
                                                  late["raw_value"], late[EVENT_TIME_MS], strict=True):
        raw = bytes(raw)
        end = window_start(int(time), window_ms) + window_ms
        keys.append(f"{topic}/{int(partition)}/{int(offset)}")
        values.append(json.dumps({
            "reason": f"late: its window ended at {iso_time(end)}, the watermark was {iso_time(watermark)}",
            "source_topic": topic, "source_partition": int(partition), "source_offset": int(offset),
            "value_base64": mime_base64(raw[:MAX_DEAD_LETTER_VALUE_BYTES]),
            "value_truncated": len(raw) > MAX_DEAD_LETTER_VALUE_BYTES,
        }, separators=(",", ":"), ensure_ascii=False))
    return pd.DataFrame({"kind": KIND_DEAD_LETTER, "key": keys, "window_start": None, "window_end": None,
                         "count": pd.array([None] * len(keys), dtype="Int64"), DEAD_LETTER_VALUE: values})


def mime_base64(raw: bytes) -> str:
    """Base64 as Spark's `base64` writes it: lines of 76 characters, separated by CRLF."""
    text = base64.b64encode(raw).decode()
    return "\r\n".join(text[i:i + 76] for i in range(0, len(text), 76))


def dead_letter_frames(rows: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    for frame in rows:
        yield pd.DataFrame({
            "kind": KIND_DEAD_LETTER,
            "key": frame[DEAD_LETTER_KEY].to_numpy(),
            "window_start": None, "window_end": None,
            "count": pd.array([None] * len(frame), dtype="Int64"),
            DEAD_LETTER_VALUE: frame[DEAD_LETTER_VALUE].to_numpy(),
        })[_OUTPUT_COLUMNS]
