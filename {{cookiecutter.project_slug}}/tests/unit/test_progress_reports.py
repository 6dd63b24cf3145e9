"""The runner's view of a query's progress reports: each report once, in order, when several
batches end between two polls and after the query has ended (the batch before a failure)."""

from __future__ import annotations

import logging

import pytest
from pyspark.errors import StreamingQueryException

from {{ cookiecutter.package_name }}.supervision.progress_reports import ProgressReports


class ReportingQuery:
    """Spark's side: a report per trigger, the last `kept` of them retained (as
    spark.sql.streaming.numRecentProgressUpdates), and how often recentProgress was read."""

    def __init__(self, kept: int = 100) -> None:
        self.kept, self.reports, self.recent_reads, self._second = kept, [], 0, 0

    def batch(self, batch_id: int, rows: int = 10) -> None:
        self._add({"batchId": batch_id, "numInputRows": rows, "durationMs": {"addBatch": 5, "triggerExecution": 9}})

    def idle(self, next_batch_id: int) -> None:
        self._add({"batchId": next_batch_id, "numInputRows": 0, "durationMs": {"triggerExecution": 1}})

    def _add(self, report: dict) -> None:
        self._second += 1
        report["timestamp"] = f"2026-11-25T06:{self._second // 60:02d}:{self._second % 60:02d}.000Z"
        self.reports = [*self.reports, report][-self.kept:]

    @property
    def lastProgress(self) -> dict | None:
        return self.reports[-1] if self.reports else None

    @property
    def recentProgress(self) -> list[dict]:
        self.recent_reads += 1
        return list(self.reports)


def seen(reports: list[dict]) -> list[tuple[int, int]]:
    return [(r["batchId"], r["numInputRows"]) for r in reports]


def test_one_batch_per_poll_reads_only_the_last_report():
    query, reports = ReportingQuery(), ProgressReports()
    assert reports.new(query) == []
    query.batch(0)
    assert seen(reports.new(query)) == [(0, 10)]
    assert reports.new(query) == []  # nothing new since
    query.idle(1)
    assert seen(reports.new(query)) == [(1, 0)]
    query.idle(1)
    assert seen(reports.new(query)) == [(1, 0)]
    query.batch(1)
    assert seen(reports.new(query)) == [(1, 10)]
    query.batch(2)
    assert seen(reports.new(query)) == [(2, 10)]
    assert query.recent_reads == 1  # the run's first report only


@pytest.mark.parametrize("between_polls", [
    ["batch 3", "batch 4"],                 # two batches with input
    ["batch 3", "idle 4"],                  # a batch, then the input was drained
    ["idle 3", "batch 3", "idle 4"],        # idle, a batch, idle again
    ["batch 3", "batch 4", "batch 5", "idle 6"],
])
def test_batches_that_end_between_two_polls_are_all_returned_in_order(between_polls):
    query, reports = ReportingQuery(), ProgressReports()
    query.batch(2)
    reports.new(query)
    expected = []
    for step in between_polls:
        kind, batch_id = step.split()
        (query.batch if kind == "batch" else query.idle)(int(batch_id))
        expected.append((int(batch_id), 10 if kind == "batch" else 0))
    assert seen(reports.new(query)) == expected


def test_the_report_of_the_batch_before_a_failure_is_read_after_the_query_ended():
    """Batch 0 ends, batch 1 fails within the same second: the poll that sees the query ended
    still returns batch 0's report (CI once lost its log line this way)."""
    query, reports = ReportingQuery(), ProgressReports()
    query.batch(0, rows=1000)  # then the query fails; its reports stay readable
    assert seen(reports.new(query)) == [(0, 1000)]


def test_the_first_poll_of_a_run_returns_every_report_so_far():
    query, reports = ReportingQuery(), ProgressReports()
    query.batch(57)  # a restart resumes at the checkpoint's batch
    query.batch(58)
    assert seen(reports.new(query)) == [(57, 10), (58, 10)]


def test_reports_gone_before_they_were_read_are_named_in_a_warning(caplog):
    query, reports = ReportingQuery(kept=3), ProgressReports()
    query.batch(0)
    reports.new(query)
    for batch_id in range(1, 7):
        query.batch(batch_id)
    with caplog.at_level(logging.WARNING):
        assert seen(reports.new(query)) == [(4, 10), (5, 10), (6, 10)]
    assert "batches 1 to 3 are gone" in caplog.text


class EndedQuery(ReportingQuery):
    """A query that has already ended when the runner first looks: as after batch 0 ended and
    batch 1 failed within one poll; `failure` None: stopped. As PySpark's, awaitTermination
    raises the failure rather than returning True."""

    def __init__(self, failure: Exception | None) -> None:
        super().__init__()
        self.failure = failure
        self.status = {"isTriggerActive": False}

    def awaitTermination(self, _timeout: float) -> bool:
        if self.failure is not None:
            raise self.failure
        return True


@pytest.mark.parametrize("failure", [StreamingQueryException("batch 1 failed"), None])
def test_the_runner_logs_the_batches_of_a_query_that_ended_before_its_poll(failure, caplog):
    import threading
    from types import SimpleNamespace

    from {{ cookiecutter.package_name }}.config import load_config
    from {{ cookiecutter.package_name }}.startup.startup import StartupTimes
    from {{ cookiecutter.package_name }}.supervision import runner
    from {{ cookiecutter.package_name }}.supervision.outage import OutageTolerance

    config = load_config(None, {"sink_id": "reports-unit"}, environ={})
    query = EndedQuery(failure)
    query.batch(0, rows=1000)
    query.batch(1, rows=500)
    stop = runner.StopRequested()
    sink = SimpleNamespace(published=lambda _batch_id: None)  # nothing published by this process
    outage = OutageTolerance(config, stop.event)
    with caplog.at_level(logging.INFO, logger=runner.__name__):
        if failure is None:
            assert runner._supervise(query, sink, config, stop, None, outage, threading.Event(), StartupTimes())
        else:
            with pytest.raises(StreamingQueryException, match="batch 1 failed"):
                runner._supervise(query, sink, config, stop, None, outage, threading.Event(), StartupTimes())
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("batch ")]
    assert [line.split(":")[0] for line in lines] == ["batch 0", "batch 1"], lines
