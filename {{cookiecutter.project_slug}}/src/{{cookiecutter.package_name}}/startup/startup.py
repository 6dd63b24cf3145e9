"""Where a start's seconds go: each step from the process's start to the first batch's output,
logged once in one line (and as a `started` event in JSON logs). `bench-startup` reads it."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from datetime import datetime

from ..observability.logs import event

log = logging.getLogger(__name__)

# From Spark's report of the first batch: how its trigger's time splits.
FIRST_BATCH_PARTS = {"latestOffset": "offsets", "queryPlanning": "planning", "addBatch": "run and sink",
                     "walCommit": "offset log", "commitOffsets": "commit log"}


def seconds_since_process_start() -> float:
    """On Linux, from the kernel's start time of this process (the interpreter's own start and
    the imports count); elsewhere 0."""
    try:
        with open("/proc/self/stat") as stat:
            started_ticks = int(stat.read().rpartition(")")[2].split()[19])
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


class StartupTimes:
    """The steps of one start, in order; `first_batch` logs them with the first batch that had
    input (for a restart after a crash: the batch it re-runs)."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = [("python", seconds_since_process_start())]
        self._last = time.monotonic()
        self.reported = False

    def step(self, name: str) -> None:
        """The step `name` ended now (it began where the previous one ended)."""
        if self.reported:  # a query restarted after the first batch: not part of the start
            return
        now = time.monotonic()
        self.steps.append((name, now - self._last))
        self._last = now

    def first_batch(self, progress: dict, sink_seconds: dict[str, float]) -> None:
        """`sink_seconds`: the parts of the first batch's run in the sink, by name."""
        if self.reported:
            return
        durations = progress.get("durationMs", {})
        # The runner reads reports a while after they end: the batch ended at its trigger's start
        # plus the trigger's duration.
        self.step("first batch")
        self.reported = True
        with contextlib.suppress(KeyError, ValueError):
            ended = (datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
                     + durations["triggerExecution"] / 1000)
            name, seconds = self.steps[-1]
            self.steps[-1] = (name, max(0.0, seconds - max(0.0, time.time() - ended)))
        parts = {label: durations[key] / 1000 for key, label in FIRST_BATCH_PARTS.items() if key in durations}
        parts.update(sink_seconds)
        total = sum(seconds for _, seconds in self.steps)
        log.info("started: first batch %s out %.1fs after the process began (%s; first batch: %s)",
                 progress.get("batchId"), total, ", ".join(f"{name} {seconds:.1f}s" for name, seconds in self.steps),
                 ", ".join(f"{name} {seconds:.1f}s" for name, seconds in parts.items()),
                 extra=event("started", seconds=round(total, 3), batch_id=progress.get("batchId"),
                             steps={name: round(seconds, 3) for name, seconds in self.steps},
                             first_batch={name: round(seconds, 3) for name, seconds in parts.items()}))
