"""`kafka up` / `kafka down`: a local broker that outlives the command, for the demo and
for development. Its state (pid, ports) lives in a small JSON file in the work directory."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from .process import LocalKafkaBroker

STATE_FILE = "broker.json"


def up(workdir: Path) -> str:
    """Start a broker in `workdir` unless one already runs there; return its bootstrap servers."""
    workdir.mkdir(parents=True, exist_ok=True)
    state_path = workdir / STATE_FILE
    if (running := running_bootstrap(workdir)) is not None:
        print(f"kafka: a local broker already runs at {running}")
        return running
    broker = LocalKafkaBroker(workdir)
    if state_path.exists():  # reuse the ports: the KRaft voter endpoint was formatted with them
        state = json.loads(state_path.read_text())
        broker.port, broker.controller_port = state["port"], state["controller_port"]
    seconds = broker.start()
    assert broker.process is not None
    state_path.write_text(json.dumps({
        "pid": broker.process.pid, "port": broker.port, "controller_port": broker.controller_port,
        "bootstrap_servers": broker.bootstrap_servers, "log": str(broker.log_file),
    }))
    print(f"kafka: local broker ready at {broker.bootstrap_servers} in {seconds:.1f}s (log {broker.log_file})")
    return broker.bootstrap_servers


def down(workdir: Path, timeout: float = 30.0) -> bool:
    """Stop the broker started by `up` in `workdir`; False when none was running."""
    state_path = workdir / STATE_FILE
    if not state_path.exists():
        return False
    pid = json.loads(state_path.read_text())["pid"]
    if not _is_our_broker(pid):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:  # it ended meanwhile
        pass
    return True


def running_bootstrap(workdir: Path) -> str | None:
    state_path = workdir / STATE_FILE
    if state_path.exists():
        state = json.loads(state_path.read_text())
        if _is_our_broker(state["pid"]):
            return state["bootstrap_servers"]
    return None


def _is_our_broker(pid: int) -> bool:
    """The broker `up` started: alive, leading its own process group (it was started in a new
    session) and, where /proc tells, running Kafka. After a reboot the state file's pid can
    belong to any other process, which must be neither reported as the broker nor signalled."""
    if not _alive(pid):
        return False
    try:
        if os.getpgid(pid) != pid:
            return False
    except ProcessLookupError:
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        return b"kafka.Kafka" in cmdline.read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc on this system: the group check must do


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours counts as gone
        waited, _ = os.waitpid(pid, os.WNOHANG)
        return waited == 0
    except ChildProcessError:
        return True
