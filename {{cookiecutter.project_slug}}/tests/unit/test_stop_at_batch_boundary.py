"""Stopping between two batches: in a moment with no batch running, or, for a query that is
never idle (the TTL count runs no-data batches back to back), through the sink's gate: the next
batch ends the query before it publishes anything."""

from __future__ import annotations

import threading
import time

from {{ cookiecutter.package_name }}.supervision.runner import stop_at_batch_boundary


class QueryRunningBatches:
    """A StreamingQuery as the runner sees it: batch after batch, each `batch_seconds` long,
    `pause_seconds` apart. With the sink's gate set, the next batch to start fails the query at
    the sink, as KafkaSink does."""

    def __init__(self, batch_seconds: float, pause_seconds: float, gate: threading.Event | None = None) -> None:
        self.batch_seconds, self.pause_seconds, self.gate = batch_seconds, pause_seconds, gate
        self.started = time.monotonic()
        self.gate_batch: int | None = None  # the batch that was running when the gate was seen set
        self.ended_at: float | None = None
        self.stop_called_in_batch = False

    def _position(self) -> tuple[int, bool]:
        period = self.batch_seconds + self.pause_seconds
        elapsed = time.monotonic() - self.started
        return int(elapsed // period), elapsed % period < self.batch_seconds

    @property
    def isActive(self) -> bool:
        batch, _ = self._position()
        if self.ended_at is None and self.gate is not None and self.gate.is_set():
            if self.gate_batch is None:
                self.gate_batch = batch
            elif batch > self.gate_batch:  # a new batch reached the sink: the query fails there
                self.ended_at = self.started + batch * (self.batch_seconds + self.pause_seconds)
        return self.ended_at is None

    @property
    def status(self) -> dict:
        return {"isTriggerActive": self._position()[1]}

    def stop(self) -> None:
        if self.ended_at is None:
            self.stop_called_in_batch = self._position()[1]
            self.ended_at = time.monotonic()


def test_a_query_that_is_never_idle_stops_when_the_running_batch_ends():
    gate = threading.Event()
    query = QueryRunningBatches(batch_seconds=0.5, pause_seconds=0.0, gate=gate)
    time.sleep(0.1)
    stop_at_batch_boundary(query, gate, timeout=10)
    assert gate.is_set()
    # It ended where a batch ended (the fake sets ended_at to a boundary; a loaded machine may pass a few).
    assert query.ended_at is not None
    boundaries = (query.ended_at - query.started) / 0.5
    assert boundaries >= 1 and abs(boundaries - round(boundaries)) < 1e-6
    assert not query.stop_called_in_batch


def test_a_query_with_pauses_stops_in_the_pause():
    query = QueryRunningBatches(batch_seconds=0.4, pause_seconds=0.4)
    time.sleep(0.1)
    stop_at_batch_boundary(query, timeout=10)
    assert query.ended_at - query.started >= 0.4  # not before the first batch ended
    assert not query.stop_called_in_batch  # in a pause, whichever


def test_a_batch_that_never_ends_is_stopped_after_the_time_out():
    query = QueryRunningBatches(batch_seconds=60, pause_seconds=0)
    stop_at_batch_boundary(query, timeout=0.3)
    assert 0.3 <= query.ended_at - query.started < 60  # after the time-out, long before the batch would end
