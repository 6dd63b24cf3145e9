"""Stopping between two batches: when the query goes idle, or when the batch running at the
request ends (a query with timers runs batches back to back and is never idle)."""

from __future__ import annotations

import time

from {{ cookiecutter.package_name }}.runner import stop_at_batch_boundary


class QueryRunningBatches:
    """A StreamingQuery's status and progress as the runner polls them: batch after batch, each
    `batch_seconds` long, with or without a pause between them."""

    def __init__(self, batch_seconds: float, pause_seconds: float) -> None:
        self.batch_seconds, self.pause_seconds = batch_seconds, pause_seconds
        self.started = time.monotonic()
        self.stopped_at: float | None = None
        self.isActive = True

    def _position(self) -> tuple[int, bool]:
        period = self.batch_seconds + self.pause_seconds
        elapsed = time.monotonic() - self.started
        return int(elapsed // period), elapsed % period < self.batch_seconds

    @property
    def status(self) -> dict:
        return {"isTriggerActive": self._position()[1]}

    @property
    def lastProgress(self) -> dict | None:
        done = self._position()[0] - 1  # the batches before the running one
        return None if done < 0 else {"batchId": done}

    def stop(self) -> None:
        self.stopped_at = time.monotonic()
        self.isActive = False


def test_a_query_that_is_never_idle_stops_when_the_running_batch_ends():
    query = QueryRunningBatches(batch_seconds=0.5, pause_seconds=0.0)
    time.sleep(0.1)
    stop_at_batch_boundary(query, timeout=10)
    assert query.stopped_at is not None
    assert 0.5 <= query.stopped_at - query.started < 0.8, "stopped before the batch ended, or long after"


def test_a_query_with_pauses_stops_in_the_pause():
    query = QueryRunningBatches(batch_seconds=0.4, pause_seconds=0.4)
    time.sleep(0.1)
    stop_at_batch_boundary(query, timeout=10)
    assert 0.4 <= query.stopped_at - query.started < 0.6


def test_a_batch_that_never_ends_is_stopped_after_the_time_out():
    query = QueryRunningBatches(batch_seconds=60, pause_seconds=0)
    stop_at_batch_boundary(query, timeout=0.3)
    assert 0.3 <= query.stopped_at - query.started < 1
