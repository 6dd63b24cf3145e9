"""Fault injection for the crash tests: SIGKILL at a named step of the commit protocol.

Enabled only through the environment, never through the job's configuration:
  {{ cookiecutter.package_name | upper }}_FAULT_POINT  one of POINTS
  {{ cookiecutter.package_name | upper }}_FAULT_BATCH  fire at the first batch with id >= this (default 0)
A fault kills the whole process group (driver JVM, driver Python, Python workers): a real crash
of the driver, with no clean-up, exactly like a lost machine.
"""

from __future__ import annotations

import os
import signal
import sys

POINT_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_POINT"
BATCH_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_BATCH"

SINK_TASK = "sink_task"  # on an executor, while a sink task writes its part (phase 1)
AFTER_STAGING = "after_staging"  # every task staged; the coordinator has not started
AFTER_LOG_ENTRY = "after_log_entry"  # the sink log says prepared; Kafka untouched
BEFORE_KAFKA_COMMIT = "before_kafka_commit"  # records and marker produced, transaction open
AFTER_KAFKA_COMMIT = "after_kafka_commit"  # the transaction committed; Spark's commits/N not written
POINTS = (SINK_TASK, AFTER_STAGING, AFTER_LOG_ENTRY, BEFORE_KAFKA_COMMIT, AFTER_KAFKA_COMMIT)


def armed_point() -> str | None:
    point = os.environ.get(POINT_VARIABLE) or None
    if point is not None and point not in POINTS:
        raise ValueError(f"{POINT_VARIABLE}={point!r} is not one of {', '.join(POINTS)}")
    return point


def maybe_crash(point: str, batch_id: int) -> None:
    """SIGKILL this process group if `point` is armed for this batch."""
    if armed_point() != point or batch_id < int(os.environ.get(BATCH_VARIABLE, "0")):
        return
    print(f"fault injection: SIGKILL at {point} in batch {batch_id}", file=sys.stderr, flush=True)
    os.killpg(os.getpgid(0), signal.SIGKILL)
