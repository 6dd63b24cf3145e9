"""A query's progress reports, each seen once and in order, however the runner's polls fall.

The runner polls once a second. Several batches can end between two polls (batches of a few
hundred ms under a backlog), and the batch before a failure ends just before the query does.
`lastProgress` holds one report; `recentProgress` holds the last
spark.sql.streaming.numRecentProgressUpdates but converts every one of them, so
it is read only when the batch ids say that reports were missed.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

log = logging.getLogger(__name__)

Report = Any  # pyspark's StreamingQueryProgress, read like a dict


class ReportingQuery(Protocol):
    @property
    def lastProgress(self) -> Report | None: ...

    @property
    def recentProgress(self) -> list[Report]: ...


def ran_a_batch(report: Report) -> bool:
    """A trigger that ran a batch (with data, or a no-data batch that advances state) reports
    addBatch; an idle trigger does not."""
    return "addBatch" in (report.get("durationMs") or {})


def next_batch_id(report: Report) -> int:
    """The batch id of the report after `report` when none was missed: a trigger that ran batch N
    is followed by batch N+1 or by idle triggers reporting N+1; an idle one by more of the same."""
    return report["batchId"] + (1 if ran_a_batch(report) else 0)


class ProgressReports:
    """The reports of one query (one run: a restart makes a new query) not returned yet."""

    def __init__(self) -> None:
        self._last: Report | None = None

    def new(self, query: ReportingQuery) -> list[Report]:
        """The reports since the previous call, oldest first; also after the query has ended."""
        latest = query.lastProgress
        if latest is None or (self._last is not None and latest["timestamp"] == self._last["timestamp"]):
            return []
        if self._last is not None and latest["batchId"] <= next_batch_id(self._last):
            reports = [latest]
        else:  # the first report of this run, or batches ended between two calls
            since = self._last["timestamp"] if self._last is not None else ""
            reports = [r for r in query.recentProgress if r["timestamp"] > since] or [latest]
            if self._last is not None and reports[0]["batchId"] > next_batch_id(self._last):
                log.warning("the progress reports of batches %d to %d are gone before they were read: more "
                            "than spark.sql.streaming.numRecentProgressUpdates ended in a second",
                            next_batch_id(self._last), reports[0]["batchId"] - 1)
        self._last = reports[-1]
        return reports
