"""Fault injection for the crash tests: SIGKILL at a named step of the commit protocol.

Inert unless armed, and only the development tools arm it: their launcher of the job
(`{{ cookiecutter.package_name }}_tools.armed_job`, which the tests and the chaos runner start the job through) reads
these variables and calls `arm`; the job's own command and the image never do, so a stray
variable in a production environment fires nothing:
  {{ cookiecutter.package_name | upper }}_FAULT_POINT  one of POINTS, or several separated by commas
  {{ cookiecutter.package_name | upper }}_FAULT_BATCH  fire at the first batch with id >= this (default 0)
  {{ cookiecutter.package_name | upper }}_FAULT_MODE   kill (default), kill_task, raise, hang or pause: raise fails the batch with an
                                  exception instead, to exercise the runner's restart strategy;
                                  hang sleeps there for an hour, a stuck sink for health checks;
                                  pause waits there, in every batch from the first, until the
                                  file `<fault log>.release-<point>-<batch>` exists: a test acts
                                  on Kafka meanwhile (kills the leader of a partition, a coordinator)
  {{ cookiecutter.package_name | upper }}_FAULT_LOG    a file each fired fault is recorded in
A fault kills the driver's process group (the driver's Python process and its JVM): a real crash
of the driver, with no clean-up, exactly like a lost machine. BEFORE_KAFKA_COMMIT and
AFTER_KAFKA_COMMIT are in the publishing task where Spark tasks publish the batch, armed as the
driver was (DriverFaults); there, kill_task kills the task's Python worker only, once (the job
lives on, and runs the batch again): what an executor lost in the middle of a shard's
transaction leaves. Local mode only: a task kills the driver's process group by its number.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from ..failures import JobFailure, Outcome
from ..waiting import poll

POINT_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_POINT"
BATCH_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_BATCH"
MODE_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_MODE"
LOG_VARIABLE = "{{ cookiecutter.package_name | upper }}_FAULT_LOG"
VARIABLES = (POINT_VARIABLE, BATCH_VARIABLE, MODE_VARIABLE, LOG_VARIABLE)
MODES = ("kill", "kill_task", "raise", "hang", "pause")
PAUSE_SECONDS = 600  # a pause that nothing released ends by itself
TASK_ONLY = " (the task only)"  # the end of a kill_task fault's line

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


@dataclass(frozen=True)
class Armed:
    """The points armed, from the batch on, and what firing one does (the variables above)."""

    points: tuple[str, ...]
    batch: int = 0
    mode: str = "kill"
    log: str = ""  # the fault log's path; "" for none

    @classmethod
    def of(cls, settings: Mapping[str, str]) -> Armed | None:
        """What `settings` (the variables above) arm, None where they name no point; a value that
        is not one of them refused, naming the variable."""
        points = tuple(point.strip() for point in settings.get(POINT_VARIABLE, "").split(",") if point.strip())
        for point in points:
            if point not in POINTS + SAVEPOINT_POINTS:
                raise ValueError(f"{POINT_VARIABLE}={point!r} is not one of {', '.join(POINTS + SAVEPOINT_POINTS)}")
        mode = settings.get(MODE_VARIABLE, "kill")
        if mode not in MODES:
            raise ValueError(f"{MODE_VARIABLE}={mode!r} is not one of {', '.join(MODES)}")
        batch = settings.get(BATCH_VARIABLE, "0")
        if not batch.isdigit():
            raise ValueError(f"{BATCH_VARIABLE}={batch!r} is not a batch id")
        log = settings.get(LOG_VARIABLE, "")
        if mode in ("pause", "kill_task") and not log:
            raise ValueError(f"{MODE_VARIABLE}={mode} needs {LOG_VARIABLE}: the file that says where it stands")
        return cls(points, int(batch), mode, log) if points else None


_armed: Armed | None = None  # what this process fires: nothing, unless arm() was called
_process_group: int | None = None  # in a publishing task: the driver's (in_task_of)


def arm(settings: Mapping[str, str]) -> None:
    """Arm the points `settings` name, in this process and the publishing tasks its batches start.
    The development tools' launcher of the job calls it; nothing of the job does."""
    global _armed
    _armed = Armed.of(settings)


@dataclass(frozen=True)
class DriverFaults:
    """What the driver hands its publishing tasks, whose processes may not share its state (an
    executor on a standalone cluster): its process group and what it armed."""

    process_group: int
    armed: Armed | None

    @classmethod
    def of_driver(cls) -> DriverFaults:
        return cls(os.getpgid(0), _armed)


def in_task_of(driver: DriverFaults) -> None:
    """This process runs a publishing task: the driver's faults apply, and kill the driver."""
    global _process_group, _armed
    _process_group, _armed = driver.process_group, driver.armed


class InjectedFault(JobFailure, RuntimeError):
    """The exception of FAULT_MODE=raise: a failure like any other, retried."""

    outcome = Outcome.RETRY


def maybe_crash(point: str, batch_id: int, checkpoint: str | None = None) -> None:
    """SIGKILL this process group (or raise) if `point` is armed for this batch. At
    WRITING_SPARK_COMMIT, first leave what a crash in the middle of Spark's commit leaves."""
    armed = _armed
    if armed is None or point not in armed.points or batch_id < armed.batch:
        return
    if point == WRITING_SPARK_COMMIT and checkpoint is not None:
        _leave_partial_commit(checkpoint, batch_id)
    if armed.mode == "raise":
        raise InjectedFault(f"fault injection: {point} in batch {batch_id}")
    if armed.mode == "pause":
        _pause(armed, point, batch_id)
        return
    line = f"fault injection: {'hang' if armed.mode == 'hang' else 'SIGKILL'} at {point} in batch {batch_id}"
    if armed.mode == "kill_task":
        line += TASK_ONLY
        if _fired(armed, TASK_ONLY):
            return
    _record(armed, line)
    if armed.mode == "hang":
        time.sleep(3600)
        return
    if armed.mode == "kill_task" and _process_group is not None:
        os.kill(os.getpid(), signal.SIGKILL)
    if _process_group is not None:
        os.killpg(_process_group, signal.SIGKILL)
    os.killpg(os.getpgid(0), signal.SIGKILL)


def release_file(fault_log: str, point: str, batch_id: int) -> str:
    """The file whose existence ends a pause at `point` in batch `batch_id`."""
    return f"{fault_log}.release-{point}-{batch_id}"


def _pause(armed: Armed, point: str, batch_id: int, timeout: float = PAUSE_SECONDS) -> None:
    _record(armed, f"fault injection: pause at {point} in batch {batch_id}")
    poll(lambda: os.path.exists(release_file(armed.log, point, batch_id)), bool, timeout, pause=0.05)


def _fired(armed: Armed, suffix: str) -> bool:
    """Whether a line of the fault log ends with `suffix`: a fault that fires once has fired."""
    return os.path.exists(armed.log) and any(line.endswith(suffix) for line in open(armed.log).read().splitlines())


def _record(armed: Armed, message: str) -> None:
    print(message, file=sys.stderr, flush=True)  # Spark may swallow a worker's stderr: hence the log file
    if armed.log:
        with open(armed.log, "a") as log:
            log.write(message + "\n")


def _leave_partial_commit(checkpoint: str, batch_id: int) -> None:
    """Spark writes `commits/N` as `commits/.N.<uuid>.tmp`, then renames it (CheckpointFileManager):
    a crash in between leaves the temporary file, cut short."""
    from ..storage.files import filesystem

    fs, base = filesystem(checkpoint)
    fs.create_dir(f"{base}/commits", recursive=True)
    with fs.open_output_stream(f"{base}/commits/.{batch_id}.{uuid.uuid4()}.tmp") as out:
        out.write(b"v1\n{\"nextBatchWatermarkMs\"")
