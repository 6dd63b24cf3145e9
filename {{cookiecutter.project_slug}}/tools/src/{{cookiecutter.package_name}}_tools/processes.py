"""The machine's processes, read from /proc: a process tree, what runs where, how much CPU and
memory it took, and killing a snapshot of them without hitting a reused pid. Shared by the chaos
runner and the benchmark."""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from {{ cookiecutter.package_name }}.sink import faults


def processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time) of every process, from /proc/<pid>/stat."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                stat = stat_file.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
        fields = stat[stat.rindex(b")") + 2:].split()
        table[int(entry)] = (int(fields[1]), int(fields[19]))
    return table


def descendants(root: int) -> dict[int, tuple[int, int]]:
    """Every process below `root`, as pid -> (parent pid, start time)."""
    table = processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: dict[int, tuple[int, int]] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found[child] = table[child]
                stack.append(child)
    return found


def kill_processes(known: dict[int, tuple[int, int]]) -> None:
    """SIGKILL the processes of a snapshot that still run, never a later process with a reused pid."""
    now = processes()
    for pid, (_, started) in known.items():
        if pid in now and now[pid][1] == started:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def is_our_daemon(pid: int, marker: bytes) -> bool:
    """A process a `... up` command started (a broker, a registry): alive, leading its own process
    group (it was started in a new session) and, where /proc tells, with `marker` in its command
    line. After a reboot a state file's pid can belong to any other process, which must be
    neither reported as the service nor signalled."""
    if not alive(pid):
        return False
    try:
        if os.getpgid(pid) != pid:
            return False
    except ProcessLookupError:
        return False
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc on this system: the group check must do


def alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie child of ours counts as gone."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        return waited == 0
    except ChildProcessError:
        return True


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def cpu_ticks(pid: int) -> int | None:
    """User + system CPU time of a process, in clock ticks."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            stat = stat_file.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user and system, all its threads) process `pid` has used; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after the command's name, which may hold spaces
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14 and 15


def field_kib(pid: int, field: str = "VmHWM", source: str = "status") -> int | None:
    """A KiB field of /proc/<pid>/<source> (VmHWM in status: the peak resident set; Pss in
    smaps_rollup: the proportional share); None once the process is gone."""
    try:
        with open(f"/proc/{pid}/{source}") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def disposable_job_settings(bootstrap_servers: str, topics: dict[str, str], sink_id: str, transactional_id_prefix: str,
                            guarantee: str, checkpoint_location: str) -> dict[str, str]:
    """The settings of a job that a test or the chaos runner starts and throws away:
    its own topics (`input_topic`, `output_topic`, `dead_letter_topic`, `marker_topic`), short
    triggers and restart delays, two shuffle partitions, no UI and no metrics endpoint."""
    return {
        "bootstrap_servers": bootstrap_servers,
        **topics,
        "sink_id": sink_id,
        "transactional_id_prefix": transactional_id_prefix,
        "delivery_guarantee": guarantee,
        "checkpoint_location": checkpoint_location,
        "trigger_interval_seconds": "0.5",
        "shuffle_partitions": "2",
        "ui_port": "0",
        "metrics_port": "0",
        "restart_delay_seconds": "1",
    }


JOB_PACKAGE = "{{ cookiecutter.package_name }}"


def job_command(arguments: list[str], settings: dict[str, str], launcher: list[str] | None = None) -> list[str]:
    """The job's own CLI (`python -m <package> <arguments>`, or through `launcher`), configured by
    `--set option=value` only."""
    command = [*(launcher or [sys.executable, "-m", JOB_PACKAGE]), *arguments]
    for name, value in settings.items():
        command += ["--set", f"{name}={value}"]
    return command


def start_job(arguments: list[str], settings: dict[str, str], cwd: Path, log_path: Path,
              env: dict[str, str] | None = None, launcher: list[str] | None = None,
              arm_faults: bool = True) -> subprocess.Popen:
    """Run the job's own CLI (`python -m <package> <arguments> --set option=value ...`, or through
    `launcher`, e.g. deploy/spark-submit.sh) as production runs it: a process in a session of its
    own, so that a fault or a test can SIGKILL its whole group (driver, JVM, Python workers);
    configured by `--set` only (the environment's `<PACKAGE>_*` options are dropped); its output
    in `log_path`. Spark's scratch space goes under `cwd` (a SIGKILL leaves it behind: in /tmp
    each killed run would keep its copies of the job's jars, 0.1-0.7 GB). Where `env` names
    fault points (the job's sink/faults.py) and `arm_faults`, the driver runs through the tools'
    launcher that arms them (armed_job.py): the job's own command would leave them alone."""
    command = job_command(arguments, settings, launcher)
    prefix = f"{JOB_PACKAGE.upper()}_"
    environment = {k: v for k, v in os.environ.items() if not k.startswith(prefix)}
    environment.update({"PYTHONUNBUFFERED": "1", **(env or {})})
    environment.setdefault("SPARK_LOCAL_DIRS", str(cwd / "spark-local"))
    if arm_faults and any(name in environment for name in faults.VARIABLES):
        command = _armed(command, environment, cwd)
    with open(log_path, "w") as log:
        return subprocess.Popen(command, cwd=cwd, env=environment, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


ARMED_JOB = f"{__package__}.armed_job"


def _armed(command: list[str], environment: dict[str, str], cwd: Path) -> list[str]:
    """`command` with its driver started through armed_job.py: in place of `python -m <package>`,
    or, through deploy/spark-submit.sh, as the driver's Python (spark.pyspark.driver.python, a
    script in `cwd` that runs the driver's file through it: it takes no arguments of its own)."""
    own = [sys.executable, "-m", JOB_PACKAGE]
    if command[:3] == own:
        return [sys.executable, "-m", ARMED_JOB, *command[3:]]
    if not any(part.endswith("spark-submit.sh") for part in command):
        raise ValueError(f"fault points are armed for `python -m {JOB_PACKAGE}` or deploy/spark-submit.sh, "
                         f"not for {command[:3]}")
    driver_python = cwd / "armed-driver-python"
    if " " in str(driver_python):
        raise ValueError(f"{driver_python}: spark-submit.sh splits SPARK_SUBMIT_ARGS on spaces")
    python = environment.get("PYTHON", sys.executable)
    driver_python.write_text(f'#!/bin/sh\nexec {shlex.quote(python)} -m {ARMED_JOB} "$@"\n')
    driver_python.chmod(0o755)
    environment["SPARK_SUBMIT_ARGS"] = " ".join(
        (environment.get("SPARK_SUBMIT_ARGS", ""), f"--conf spark.pyspark.driver.python={driver_python}")).strip()
    return command


def dump_stacks(root: int, settle: float = 2.0) -> None:
    """Have a job that seems stuck print where it is, before it is killed: each JVM's threads
    (SIGQUIT), then its Python driver's (SIGUSR1, which the job's CLI registers), in its log."""
    below = [root, *descendants(root)]
    lines = {pid: command_line(pid) for pid in below}
    jvms = [pid for pid, line in lines.items() if line and os.path.basename(line.split()[0]) == "java"]
    drivers = [pid for pid, line in lines.items() if f"-m {JOB_PACKAGE} " in line or "deploy/main.py" in line]
    for pids, signum in ((jvms, signal.SIGQUIT), (drivers, signal.SIGUSR1)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        time.sleep(settle)


def free_port() -> int:
    """A port on the loopback interface that nothing listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` distinct such ports: held open together while they are picked, since a port picked
    and let go may be the very next one picked. Outside the range the kernel takes outgoing
    connections' local ports from, where it can: a server stopped and started again on its port (a
    broker, the S3 server, in the fault tests) would otherwise find it taken by some client's
    connection in the meantime (`Address already in use`, met once in CI)."""
    low, high = _outgoing_port_range()
    outside = [*range(10_000, low), *range(high + 1, 65_536)]
    with contextlib.ExitStack() as held:
        ports: list[int] = []
        for port in _PICK.sample(outside, min(len(outside), 50 * count)):
            if len(ports) == count:
                break
            sock = held.enter_context(socket.socket())
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use: another one
                continue
            ports.append(port)
        while len(ports) < count:  # no room outside that range: any port the kernel gives
            sock = held.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
        return ports


_PICK = random.SystemRandom()  # not the random module's generator, which a test or tool may seed


def _outgoing_port_range() -> tuple[int, int]:
    """Linux's ip_local_port_range; elsewhere IANA's dynamic ports."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49_152, 65_535
