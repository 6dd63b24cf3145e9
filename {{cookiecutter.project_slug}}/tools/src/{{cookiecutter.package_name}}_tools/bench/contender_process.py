"""A contender as a process of its own (a new session, as tests/harness.py runs the job), with
its peak memory: VmHWM of the driver's Python process, of its JVM child and of Python workers,
read from /proc while they live."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from ..processes import command_line, cpu_seconds, descendants, field_kib

PACKAGE = "{{ cookiecutter.package_name }}"  # the job's package: its CLI and environment prefix


def _kind(pid: int) -> str:
    program = os.path.basename(command_line(pid).split(" ", 1)[0])
    if program == "java":
        return "jvm"
    if program.startswith("python"):
        return "python_workers"
    return "other"


class Contender:
    """One run of a contender's process; `restart()` starts the same command again."""

    def __init__(self, name: str, command: list[str], workdir: Path, env: dict[str, str] | None = None) -> None:
        self.name, self.command, self.workdir = name, command, workdir
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(f"{PACKAGE.upper()}_")}
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env.update(env or {})
        self.process: subprocess.Popen | None = None
        self.incarnations: list[dict[str, dict[int, int]]] = []  # per start: kind -> {pid: peak KiB}
        self._sampler: threading.Thread | None = None
        self._halt = threading.Event()
        self.started_at = 0.0
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        log = open(self.workdir / f"{self.name}-{self.runs}.log", "w")  # noqa: SIM115 - the child owns it
        self.started_at = time.time()
        self.process = subprocess.Popen(self.command, cwd=self.workdir, env=self.env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.incarnations.append({"driver_python": {}, "jvm": {}, "python_workers": {}, "other": {},
                                  "workers_concurrent": {}})
        self._halt.clear()
        self._sampler = threading.Thread(target=self._sample, args=(self.process.pid, self.incarnations[-1]),
                                         daemon=True)
        self._sampler.start()

    def driver_cpu_seconds(self) -> float | None:
        """The CPU time the driver's Python process has used so far (in local mode its JVM also
        runs the executors' work, and Python workers are processes of their own: neither counts)."""
        return None if self.process is None else cpu_seconds(self.process.pid)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _sample(self, root: int, peaks: dict[str, dict[int, int]]) -> None:
        while not self._halt.is_set():
            self._take_sample(root, peaks)
            if self.process is None or self.process.poll() is not None:
                return
            self._halt.wait(0.5)

    @staticmethod
    def _take_sample(root: int, peaks: dict[str, dict[int, int]]) -> None:
        """VmHWM per process; for Python workers, which come and go and are forked from one
        daemon (sharing pages), the largest sum of the proportional set sizes (Pss) of those
        alive at one time: summing their VmHWM or RSS would count shared pages many times."""
        workers_now = 0
        for pid in [root, *descendants(root)]:
            kind = "driver_python" if pid == root else _kind(pid)
            if (hwm := field_kib(pid)) is not None:
                peaks[kind][pid] = max(peaks[kind].get(pid, 0), hwm)
            if kind == "python_workers":
                workers_now += field_kib(pid, "Pss", "smaps_rollup") or 0
        peaks["workers_concurrent"][0] = max(peaks["workers_concurrent"].get(0, 0), workers_now)

    def peak_memory_mb(self) -> dict[str, float] | None:
        """The largest incarnation: driver Python + its JVM (VmHWM), and apart the Python
        workers' largest concurrent Pss."""
        best = None
        for peaks in self.incarnations:
            driver = sum(peaks["driver_python"].values()) / 1024
            jvm = max(peaks["jvm"].values(), default=0) / 1024
            workers = peaks["workers_concurrent"].get(0, 0) / 1024
            figures = {"driver_python": round(driver, 1), "jvm": round(jvm, 1),
                       "driver_total": round(driver + jvm, 1), "python_workers": round(workers, 1)}
            if best is None or figures["driver_total"] > best["driver_total"]:
                best = figures
        return best

    def _stop_sampler(self) -> None:
        self._halt.set()
        if self._sampler is not None:
            self._sampler.join(5)

    def kill(self) -> float:
        """SIGKILL the driver's process group and every descendant: a crash. Returns when."""
        assert self.process is not None
        self._halt.set()  # one last sample first: VmHWM is gone with the process
        if self._sampler is not None:
            self._sampler.join(5)
        self._sample_once()
        family = list(descendants(self.process.pid))
        killed_at = time.time()
        self._kill_tree(family)
        self.process.wait()
        return killed_at

    def _kill_tree(self, family: list[int]) -> None:
        """SIGKILL the contender's process group and every process found below it."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _sample_once(self) -> None:
        if self.process is not None and self.incarnations:
            self._take_sample(self.process.pid, self.incarnations[-1])

    def stop(self, timeout: float = 90.0) -> int | None:
        """SIGTERM (each contender stops at a batch boundary), then SIGKILL what is left."""
        if self.process is None:
            return None
        self._sample_once()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout)
        family = list(descendants(self.process.pid)) if self.process.poll() is None else []
        self._kill_tree(family)
        self.process.wait()
        self._stop_sampler()
        return self.process.returncode

    def log_tail(self, lines: int = 15) -> str:
        path = self.workdir / f"{self.name}-{self.runs}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
