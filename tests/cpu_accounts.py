"""Where CI's minutes go: CPU time per lane and per test, from the kernel's CPU accounting (a
cgroup per lane, which every process a lane starts joins, killed drivers' orphaned JVMs
included), beside the machine's total and the containers' share. On 2 cores CI is bound by
CPU, so a test's cost is its CPU seconds, not its wall-clock seconds (which other lanes stretch).

Where no cgroup can be made (no permission, no CPU controller), the lanes run as before and
the table says so; nothing fails for want of it."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

# The per-test plugin's reader: it runs in the rendered suites' venv, so it imports nothing of these tests.
from cpu_plugin.cpu_seconds import cgroup_cpu_seconds

V1 = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1: cpuacct.usage, nanoseconds
V2 = Path("/sys/fs/cgroup")  # cgroup v2: cpu.stat's usage_usec
CONTAINERS = ("libpod_parent", "machine.slice")  # where Podman puts its containers, cgroupfs or systemd
# The per-test CPU plugin, which every charged pytest loads (PYTHONPATH and PYTEST_ADDOPTS).
PLUGIN_DIR = Path(__file__).resolve().parent / "cpu_plugin"
PLUGIN = "-p cpu_seconds"


def _alive(pid: str) -> bool:
    return pid.isdigit() and Path(f"/proc/{pid}").exists()


def machine_seconds() -> float:
    """CPU seconds every process of the machine has used since boot (/proc/stat, all but idle and iowait)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    busy = sum(fields) - fields[3] - fields[4] - sum(fields[8:])  # guest time is counted in user already
    return busy / os.sysconf("SC_CLK_TCK")


def containers_seconds() -> float | None:
    """CPU seconds of every container the engine has run (the cgroup above them keeps their sum)."""
    for root in (V1, V2):
        for name in CONTAINERS:
            if (seconds := cgroup_cpu_seconds(root / name)) is not None:
                return seconds
    return None


@dataclass(frozen=True)
class Account:
    """One lane's cgroup: its processes, and all they start, are charged to it."""

    path: Path

    @classmethod
    def new(cls, name: str) -> Account | None:
        root = V1 if V1.is_dir() else V2
        for stale in root.glob("ci-*-*"):  # left by a run whose last process outlived its table
            if stale.is_dir() and not _alive(stale.name.split("-")[1]):
                with contextlib.suppress(OSError):
                    stale.rmdir()
        path = root / f"ci-{os.getpid()}-{name}"
        try:
            path.mkdir()
        except OSError:
            return None
        if cgroup_cpu_seconds(path) is None:
            path.rmdir()
            return None
        return cls(path)

    @property
    def tasks(self) -> Path:
        """The file a process writes its pid to, to join the account (its children join with it)."""
        return self.path / ("tasks" if (self.path / "tasks").exists() else "cgroup.procs")

    def seconds(self) -> float:
        return cgroup_cpu_seconds(self.path) or 0.0

    def charged(self, argv: list[str]) -> list[str]:
        """`argv` run so that it, and every process it starts, is charged to this account."""
        return ["bash", "-c", f'echo $$ > {shlex.quote(str(self.tasks))}; exec "$@"', "charged", *argv]

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass  # a process still in it (an orphan not yet reaped): the kernel keeps it until then


def plugin_env(env: dict[str, str], log: Path, lane: str, account: Account | None) -> dict[str, str]:
    """`env` with the per-test plugin loaded (after env's own PYTEST_ADDOPTS and PYTHONPATH), writing
    `lane`'s tests to `log`, their CPU read from `account` (None: wall-clock seconds only)."""
    path = os.pathsep.join(filter(None, (env.get("PYTHONPATH"), str(PLUGIN_DIR))))
    return {**env, "PYTHONPATH": path, "PYTEST_ADDOPTS": " ".join(filter(None, (env.get("PYTEST_ADDOPTS"), PLUGIN))),
            "CI_CPU_LOG": str(log), "CI_CPU_LANE": lane, "CI_CPU_ACCOUNT": "" if account is None else str(account.path)}


def per_test(log: Path) -> list[dict[str, object]]:
    """The per-test lines that cpu_plugin/cpu_seconds.py wrote (lane, test, wall and CPU seconds)."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def table(lanes: dict[str, tuple[float, float | None]], machine: float, containers: float | None,
          tests: list[dict[str, object]], top: int = 30) -> str:
    """The lanes' wall and CPU seconds, the machine's and the containers' CPU seconds over the
    same span, and the `top` tests by CPU seconds, as a Markdown table."""
    lines = ["| what | wall (s) | CPU (s) |", "|---|---:|---:|"]
    for name, (wall, cpu) in lanes.items():
        lines.append(f"| lane: {name} | {wall:.0f} | {'n/a (no cgroup)' if cpu is None else f'{cpu:.0f}'} |")
    lines.append(f"| containers (Kafka brokers, image builds) | | "
                 f"{'n/a' if containers is None else f'{containers:.0f}'} |")
    counted = [cpu for _, cpu in lanes.values()]
    if containers is not None and None not in counted:
        rest = machine - containers - sum(cpu for cpu in counted if cpu is not None)
        lines.append(f"| the rest: the template's own tests, pip, the engine | | {rest:.0f} |")
    lines.append(f"| the machine, all processes | | {machine:.0f} |")
    suites: dict[tuple[str, str], list[float]] = {}
    for test in tests:
        suite = suites.setdefault((str(test["lane"]), "/".join(str(test["test"]).split("/")[:2])), [0, 0.0, 0.0])
        suite[0] += 1
        suite[1] += float(test["wall_s"])
        suite[2] += float(test.get("cpu_s") or 0)
    lines += ["", "| suite | run | tests | wall (s) | CPU (s) |", "|---|---|---:|---:|---:|"]
    lines += [f"| {suite} | {lane} | {count:.0f} | {wall:.0f} | {cpu:.0f} |"
              for (lane, suite), (count, wall, cpu) in suites.items()]
    lines += ["", "| test | run | wall (s) | CPU (s) |", "|---|---|---:|---:|"]
    costly = sorted(tests, key=lambda test: float(test.get("cpu_s") or 0), reverse=True)[:top]
    lines += [f"| {test['test']} | {test['lane']} | {float(test['wall_s']):.0f} | {float(test.get('cpu_s') or 0):.0f} |"
              for test in costly]
    return "\n".join(lines)
