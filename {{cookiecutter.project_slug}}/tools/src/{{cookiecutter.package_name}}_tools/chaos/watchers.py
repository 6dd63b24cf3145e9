"""What watches a run of the job from beside it: the output, to kill the driver the moment its
first record is visible (OutputWatch), and a frozen driver, woken while its replacement runs
(Zombie)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import NamedTuple

from ..processes import descendants
from .disruptions import kill_driver
from .input import QUIET


class OutputWatch(threading.Thread):
    """A read_committed consumer at the end of `topics`: SIGKILLs the driver's process group the
    moment a record appears there (a batch's commit, or a recovery's), from this thread, without
    waiting for the runner's next poll."""

    def __init__(self, bootstrap_servers: str, topics: list[str], process: subprocess.Popen) -> None:
        super().__init__(name="chaos-output-watch", daemon=True)
        self.bootstrap_servers, self.topics, self.process = bootstrap_servers, topics, process
        self.fired = False
        self.fired_after = 0.0  # seconds from the record's arrival to the SIGKILL
        self._ended = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": f"chaos-{uuid.uuid4().hex}",
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 10, **QUIET})
        try:
            assignment = []
            for topic in self.topics:
                for partition in consumer.list_topics(topic, timeout=30).topics[topic].partitions:
                    end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
                    assignment.append(TopicPartition(topic, partition, end))
            consumer.assign(assignment)
            while not self._ended.is_set() and self.process.poll() is None:
                message = consumer.poll(0.05)
                if message is None or message.error() is not None:
                    continue
                arrived = time.monotonic()
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.fired_after, self.fired = time.monotonic() - arrived, True
                return
        except Exception:  # noqa: BLE001 - a broker restarting: the run ends another way (the drained rule)
            return
        finally:
            consumer.close()

    def stop(self) -> None:
        self._ended.set()
        self.join(30)


class ZombieOutcome(NamedTuple):
    code: int | None  # its exit status; None: killed, still running after the wait
    last_line: str
    stopped_as_it_must: bool


class Zombie:
    """A driver frozen with SIGSTOP (a long GC pause, a stalled VM), its pause at a point of the
    commit protocol held by the fault injection, or none (a random moment)."""

    def __init__(self, process: subprocess.Popen, log_path: Path, point: str | None, fault_batch: int | None,
                 fault_log: Path) -> None:
        self.process, self.log_path, self.point, self.fault_batch = process, log_path, point, fault_batch
        self.fault_log = fault_log
        self.frozen: list[int] = []
        self.below: dict[int, tuple[int, int]] = {}
        self.woken = False
        self.wake_after = 0.0  # seconds after the replacement's start

    def freeze(self) -> None:
        self.below = descendants(self.process.pid)
        self.frozen = [self.process.pid, *self.below]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGSTOP)
        for pid in self.below:  # Spark's Python workers run in process groups of their own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def wake(self) -> None:
        """Let its pause end (the fault injection's release file), then SIGCONT every frozen process."""
        from {{ cookiecutter.package_name }}.sink import faults

        if self.point is not None and self.fault_batch is not None:
            Path(faults.release_file(str(self.fault_log), self.point, self.fault_batch)).touch()
        for pid in self.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.woken = True

    def outcome(self, timeout: float) -> ZombieOutcome:
        """How it ended, once it stopped; killed after `timeout` seconds (status None)."""
        try:
            code: int | None = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        kill_driver(self.process, self.below)
        output = self.log_path.read_text(errors="replace")
        last = ([line for line in output.splitlines() if line.strip()] or [""])[-1]
        # Stopped by itself with the refusal's status (1) and one line saying why, no traceback.
        clean = code == 1 and last.startswith("error: stopping:") and "Traceback" not in output
        return ZombieOutcome(code, last if code is not None else
                             f"still running {timeout:.0f}s after waking: killed; {last}", clean)
