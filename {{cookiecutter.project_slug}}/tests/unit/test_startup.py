"""The start-up line: each step of a start, logged once with the first batch (startup/startup.py),
in the form bench-startup reads back."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from datetime import UTC, datetime

from {{ cookiecutter.package_name }}.startup import startup
from {{ cookiecutter.package_name }}.startup.startup import StartupTimes
from {{ cookiecutter.package_name }}_tools.bench.startup import started_line


def _progress(ended_seconds_ago: float, trigger_ms: int = 2000) -> dict:
    began = time.time() - ended_seconds_ago - trigger_ms / 1000
    stamp = datetime.fromtimestamp(began, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return {"batchId": 0, "timestamp": stamp, "numInputRows": 10,
            "durationMs": {"latestOffset": 300, "queryPlanning": 700, "addBatch": 900, "triggerExecution": trigger_ms}}


def test_the_process_start_is_read_from_the_kernel():
    """Between the ages ps(1) reads for this process (whole seconds) before and after, however
    long it has run and however slow the machine is between the reads."""
    def by_ps() -> int:
        return int(subprocess.run(["ps", "-o", "etimes=", "-p", str(os.getpid())], capture_output=True, text=True,
                                  check=True).stdout)

    before = by_ps()
    age = startup.seconds_since_process_start()
    after = by_ps()
    assert before <= age + 1 and age <= after + 1, (before, age, after)


def test_the_first_batch_is_logged_once_with_each_step_and_read_back_by_the_bench(caplog, tmp_path):
    times = StartupTimes()
    times.step("checks")
    time.sleep(0.2)
    times.step("spark session")
    # The runner read the report 1.5 s after the batch ended: those seconds are not the start's.
    with caplog.at_level(logging.INFO, logger=startup.__name__):
        times.first_batch(_progress(ended_seconds_ago=1.5), {"sink phase 2": 0.25})
        times.first_batch(_progress(ended_seconds_ago=0), {})
        times.step("query start")  # a restart after the first batch is no part of the start
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("started: first batch 0 out ")
    assert [name for name, _ in times.steps] == ["python", "checks", "spark session", "first batch"]
    assert dict(times.steps)["first batch"] == 0.0  # ended before the runner's read, not after

    log_file = tmp_path / "eos-1.log"
    log_file.write_text(f"2026-01-01 00:00:00,000 INFO {lines[0]}\n")
    parsed = started_line(log_file)
    assert parsed is not None
    assert list(parsed["steps"]) == ["python", "checks", "spark session", "first batch"]
    assert 0.1 <= parsed["steps"]["spark session"] <= 0.5
    assert parsed["first_batch"] == {"offsets": 0.3, "planning": 0.7, "run and sink": 0.9, "sink phase 2": 0.2}
    assert parsed["seconds"] == round(sum(s for _, s in times.steps), 1)
