"""The windowed count's processor, batch by batch, with its state in memory: counts per window,
late events as dead letters in the JVM's own format, closed windows dropped."""

from __future__ import annotations

import json

import pandas as pd
from pyspark.sql import functions as F

from {{ cookiecutter.package_name }}.pipeline.changes import KIND_ANSWER, KIND_DEAD_LETTER
from {{ cookiecutter.package_name }}.pipeline.dead_letters import DEAD_LETTER_VALUE, with_dead_letter_record
from {{ cookiecutter.package_name }}.pipeline.parsing import IS_EVENT, REASON
from {{ cookiecutter.package_name }}.pipeline.windowed_counting import (
    EVENT_TIME_MS,
    WindowedCountProcessor,
    iso_time,
    late_dead_letters,
    window_key,
)

WINDOW_MS = 10_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


class FakeValueState:
    def __init__(self) -> None:
        self.value: tuple | None = None

    def exists(self) -> bool:
        return self.value is not None

    def get(self) -> tuple | None:
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class FakeHandle:
    def __init__(self) -> None:
        self.state = FakeValueState()
        self.timers: list[int] = []

    def getValueState(self, name: str, schema: str) -> FakeValueState:
        return self.state

    def registerTimer(self, at: int) -> None:
        self.timers.append(at)

    def open_windows(self) -> list[int]:
        return [] if self.state.value is None else list(self.state.value[0])


class Times:
    def __init__(self, watermark: int, now: int = T0) -> None:
        self.watermark, self.now = watermark, now

    def getCurrentWatermarkInMs(self) -> int:
        return self.watermark

    def getCurrentProcessingTimeInMs(self) -> int:
        return self.now


def events(*times: int) -> pd.DataFrame:
    return pd.DataFrame({EVENT_TIME_MS: list(times), "topic": "events", "partition": 0,
                         "offset": range(len(times)), "raw_value": [b'{"t": %d}' % t for t in times]})


def run(processor: WindowedCountProcessor, watermark: int, *times: int) -> pd.DataFrame:
    out = list(processor.handleInputRows(("red",), iter([events(*times)]), Times(watermark)))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def test_counts_per_window_accumulate_across_batches_and_only_changed_windows_are_emitted():
    processor, handle = WindowedCountProcessor(WINDOW_MS), FakeHandle()
    processor.init(handle)
    first = run(processor, 0, T0 + 1, T0 + 2, T0 + WINDOW_MS + 5)
    assert list(zip(first["key"], first["count"], strict=True)) == [(window_key("red", T0), 2),
                                                                    (window_key("red", T0 + WINDOW_MS), 1)]
    assert set(first["kind"]) == {KIND_ANSWER}
    assert list(first["window_end"]) == [iso_time(T0 + WINDOW_MS), iso_time(T0 + 2 * WINDOW_MS)]
    second = run(processor, 0, T0 + 3)
    assert list(zip(second["key"], second["count"], strict=True)) == [(window_key("red", T0), 3)]
    assert handle.timers == [T0 + WINDOW_MS]  # one timer for the key, however many batches


def test_an_event_whose_window_ended_at_the_watermark_is_a_dead_letter_and_its_window_is_gone():
    processor, handle = WindowedCountProcessor(WINDOW_MS), FakeHandle()
    processor.init(handle)
    run(processor, 0, T0 + 1, T0 + WINDOW_MS + 1)
    out = run(processor, T0 + WINDOW_MS, T0 + 2, T0 + WINDOW_MS + 2)  # window T0 ends at the watermark
    late = out[out["kind"] == KIND_DEAD_LETTER]
    assert list(late["key"]) == ["events/0/0"]
    assert json.loads(late[DEAD_LETTER_VALUE].iloc[0])["reason"].startswith("late: its window ended at ")
    counted = out[out["kind"] == KIND_ANSWER]
    assert list(zip(counted["key"], counted["count"], strict=True)) == [(window_key("red", T0 + WINDOW_MS), 2)]
    assert handle.open_windows() == [T0 + WINDOW_MS]  # the closed window's state is dropped


def expire(processor: WindowedCountProcessor, handle: FakeHandle, times: Times) -> list:
    """As Spark fires the key's first timer: the timer is deleted after the call."""
    fired = handle.timers[0]
    out = list(processor.handleExpiredTimer(("red",), times, None))
    handle.timers.remove(fired)
    return out


def test_a_timer_drops_the_closed_windows_of_a_key_that_gets_no_more_events():
    processor, handle = WindowedCountProcessor(WINDOW_MS), FakeHandle()
    processor.init(handle)
    run(processor, 0, T0 + 1, T0 + WINDOW_MS + 1)
    assert expire(processor, handle, Times(T0 + WINDOW_MS, now=T0 + WINDOW_MS)) == []
    assert handle.open_windows() == [T0 + WINDOW_MS] and handle.timers == [T0 + 2 * WINDOW_MS]
    expire(processor, handle, Times(T0 + 2 * WINDOW_MS, now=T0 + 2 * WINDOW_MS))
    assert not handle.state.exists() and handle.timers == []


def test_a_late_events_dead_letter_is_the_jvms_dead_letter_but_for_its_reason(spark):
    """The same JSON, field for field, as dead_letters.py builds for a malformed record, so the sink,
    the readers and the tests take both alike."""
    raw = "{\"color\": \"r\u00e9d\"}".encode() + b"\xff" * 70_000  # past the kept length: truncated
    row = spark.createDataFrame([(False, "x", "events", 3, 41, raw)],
                                f"{IS_EVENT} BOOLEAN, {REASON} STRING, topic STRING, partition INT, offset BIGINT, "
                                "raw_value BINARY")
    jvm = json.loads(with_dead_letter_record(row).select(F.col(DEAD_LETTER_VALUE)).first()[0])
    late = events(T0)
    late["partition"], late["offset"], late["raw_value"], late["topic"] = 3, 41, [raw], "events"
    ours = json.loads(late_dead_letters(late, T0 + WINDOW_MS, WINDOW_MS)[DEAD_LETTER_VALUE].iloc[0])
    assert list(ours) == list(jvm)
    assert {**ours, "reason": "x"} == jvm
