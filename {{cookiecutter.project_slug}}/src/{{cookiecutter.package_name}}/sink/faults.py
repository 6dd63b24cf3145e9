"""Fault injection for the crash tests: SIGKILL at a named step of the commit protocol.

Enabled only through the environment, never through the job's configuration:
  {{ cookiecutter.package_name | upper }}_FAULT_POINT  one of POINTS, or several separated by commas
  {{ cookiecutter.package_name | upper }}_FAULT_BATCH  fire at the first batch with id >= this (default 0)
  {{ cookiecutter.package_name | upper }}_FAULT_MODE   kill (default), kill_task, raise, hang or pause: raise fails the batch with an
                                  exception instead, to exercise the runner's restart strategy;
                                  hang sleeps there for an hour, a stuck sink for health checks;
                                  pause waits there, in every batch from the first, until the
                                  file `<fault log>.release-<point>-<batch>` exists: a test acts
                                  on Kafka meanwhile (kills the leader of a partition, a coordinator)
A fault kills the driver's process group (the driver's Python process and its JVM): a real crash
of the driver, with no clean-up, exactly like a lost machine. BEFORE_KAFKA_COMMIT and
AFTER_KAFKA_COMMIT are in the publishing task where Spark tasks publish the batch; there,
kill_task kills the task's Python worker only, once (the job lives on, and runs the batch
again): what an executor lost in the middle of a shard's transaction leaves. Local mode only:
a task kills the driver's process group by its number.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass

from ..failures import JobFailure, Outcome

POINT_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_POINT"
BATCH_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_BATCH"
MODE_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_MODE"
LOG_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_LOG"  # a file each fired fault is recorded in
PAUSE_SECONDS = 600
TASK_ONLY = " (the task only)"  # the end of a kill_task fault's line  # a pause that nothing released ends by itself

BATCH_COMPUTED = "batch_computed"  # the batch's records are on the driver; the coordinator has not started
AFTER_LOG_ENTRY = "after_log_entry"  # the sink log says prepared; Kafka untouched
BEFORE_KAFKA_COMMIT = "before_kafka_commit"  # records and marker produced, transaction open
AFTER_KAFKA_COMMIT = "after_kafka_commit"  # the transaction committed; Spark's commits/N not written
AFTER_LOG_COMMITTED = "after_log_committed"  # the log says committed; no commits/N
# The sink returned and Spark was writing commits/N: its temporary file is there, commits/N is not.
WRITING_SPARK_COMMIT = "writing_spark_commit"
POINTS = (BATCH_COMPUTED, AFTER_LOG_ENTRY, BEFORE_KAFKA_COMMIT, AFTER_KAFKA_COMMIT, AFTER_LOG_COMMITTED,
          WRITING_SPARK_COMMIT)
BEFORE_KAFKA = (BATCH_COMPUTED, AFTER_LOG_ENTRY)  # nothing of the batch on Kafka yet
# The points the at-least-once sink passes once its records are on Kafka (it has no transaction to
# commit: they fire one after the other, a crash at any of them re-runs the batch).
AFTER_PRODUCE = (BEFORE_KAFKA_COMMIT, AFTER_KAFKA_COMMIT, AFTER_LOG_COMMITTED)
# Savepoints (savepoints/), batch 0: `savepoint create` wrote the state, not the manifest;
# `run --from-savepoint` copied the seed into the new checkpoint, not the origin file.
SAVEPOINT_STATE_WRITTEN = "savepoint_state_written"
SAVEPOINT_SEED_COPIED = "savepoint_seed_copied"
SAVEPOINT_POINTS = (SAVEPOINT_STATE_WRITTEN, SAVEPOINT_SEED_COPIED)


_process_group: int | None = None  # in a publishing task: the driver's (in_task_of)
_task_settings: dict[str, str] | None = None  # in a publishing task: the driver's variables (in_task_of)


@dataclass(frozen=True)
class DriverFaults:
    """What the driver hands its publishing tasks, whose processes may not have its environment
    (an executor on a standalone cluster): its process group and its fault variables."""

    process_group: int
    settings: dict[str, str]

    @classmethod
    def of_driver(cls) -> DriverFaults:
        names = (POINT_VARIABLE, BATCH_VARIABLE, MODE_VARIABLE, LOG_VARIABLE)
        return cls(os.getpgid(0), {name: os.environ[name] for name in names if name in os.environ})


def in_task_of(driver: DriverFaults) -> None:
    """This process runs a publishing task: the driver's faults apply, and kill the driver."""
    global _process_group, _task_settings
    _process_group, _task_settings = driver.process_group, driver.settings


def _setting(name: str, default: str = "") -> str:
    settings = os.environ if _task_settings is None else _task_settings
    return settings.get(name, default)


def armed_points() -> tuple[str, ...]:
    """The points armed: one, or several separated by commas (the first reached fires)."""
    points = tuple(point.strip() for point in _setting(POINT_VARIABLE, "").split(",") if point.strip())
    for point in points:
        if point not in POINTS + SAVEPOINT_POINTS:
            raise ValueError(f"{POINT_VARIABLE}={point!r} is not one of {', '.join(POINTS + SAVEPOINT_POINTS)}")
    return points


class InjectedFault(JobFailure, RuntimeError):
    """The exception of FAULT_MODE=raise: a failure like any other, retried."""

    outcome = Outcome.RETRY


def maybe_crash(point: str, batch_id: int, checkpoint: str | None = None) -> None:
    """SIGKILL this process group (or raise) if `point` is armed for this batch. At
    WRITING_SPARK_COMMIT, first leave what a crash in the middle of Spark's commit leaves."""
    if point not in armed_points() or batch_id < int(_setting(BATCH_VARIABLE, "0")):
        return
    if point == WRITING_SPARK_COMMIT and checkpoint is not None:
        _leave_partial_commit(checkpoint, batch_id)
    mode = _setting(MODE_VARIABLE, "kill")
    if mode == "raise":
        raise InjectedFault(f"fault injection: {point} in batch {batch_id}")
    if mode == "pause":
        _pause(point, batch_id)
        return
    line = f"fault injection: {'hang' if mode == 'hang' else 'SIGKILL'} at {point} in batch {batch_id}"
    if mode == "kill_task":
        line += TASK_ONLY
        if _fired(TASK_ONLY):
            return
    _record(line)
    if mode == "hang":
        time.sleep(3600)
        return
    if mode == "kill_task" and _process_group is not None:
        os.kill(os.getpid(), signal.SIGKILL)
    if _process_group is not None:
        os.killpg(_process_group, signal.SIGKILL)
    os.killpg(os.getpgid(0), signal.SIGKILL)


def release_file(fault_log: str, point: str, batch_id: int) -> str:
    """The file whose existence ends a pause at `point` in batch `batch_id`."""
    return f"{fault_log}.release-{point}-{batch_id}"


def _pause(point: str, batch_id: int, timeout: float = PAUSE_SECONDS) -> None:
    log_path = _setting(LOG_VARIABLE)
    if not log_path:
        raise ValueError(f"{MODE_VARIABLE}=pause needs {LOG_VARIABLE}: the file a test reads the pause from")
    _record(f"fault injection: pause at {point} in batch {batch_id}")
    deadline = time.monotonic() + timeout
    while not os.path.exists(release_file(log_path, point, batch_id)) and time.monotonic() < deadline:
        time.sleep(0.05)


def _fired(suffix: str) -> bool:
    """Whether a line of the fault log ends with `suffix`: a fault that fires once has fired."""
    log_path = _setting(LOG_VARIABLE)
    if not log_path:
        raise ValueError(f"{MODE_VARIABLE}=kill_task needs {LOG_VARIABLE}: the file that says it fired once")
    return os.path.exists(log_path) and any(line.endswith(suffix) for line in open(log_path).read().splitlines())


def _record(message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # Spark may swallow a worker's stderr: hence the log file
    if log_path := _setting(LOG_VARIABLE):
        with open(log_path, "a") as log:
            log.write(message + "\n")


def _leave_partial_commit(checkpoint: str, batch_id: int) -> None:
    """Spark writes `commits/N` as `commits/.N.<uuid>.tmp`, then renames it (CheckpointFileManager):
    a crash in between leaves the temporary file, cut short."""
    from ..storage.files import filesystem

    fs, base = filesystem(checkpoint)
    fs.create_dir(f"{base}/commits", recursive=True)
    with fs.open_output_stream(f"{base}/commits/.{batch_id}.{uuid.uuid4()}.tmp") as out:
        out.write(b"v1\n{\"nextBatchWatermarkMs\"")
