"""The start-up wait (tools' starting.py): it waits while the service lives and makes progress,
and gives up, saying why, when it exits or stalls; never because the wall clock ran past a
time-out that a loaded machine's slow start would pass."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}_tools.starting import StartFailed, tree_progress, wait_for_start


def spawn(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_a_service_that_keeps_working_is_waited_for_past_the_stall_limit(tmp_path: Path) -> None:
    """Busy (CPU and a growing log) for longer than `stall_seconds`, then ready: waited for."""
    ready, log = tmp_path / "ready", tmp_path / "log"
    process = spawn(f"import time, pathlib\nend = time.monotonic() + 3\nwhile time.monotonic() < end:\n"
                    f"    open({str(log)!r}, 'a').write('.')\npathlib.Path({str(ready)!r}).touch()\ntime.sleep(30)")
    try:
        wait_for_start("a busy service", ready.exists, alive=lambda: process.poll() is None,
                       progress=tree_progress(process.pid, log), stall_seconds=1)
    finally:
        process.kill()
        process.wait()
    assert ready.exists()


def test_a_service_that_exits_is_reported_at_once() -> None:
    process = spawn("import sys; sys.exit(3)")
    with pytest.raises(StartFailed, match=r"^a broken service exited while starting"):
        wait_for_start("a broken service", lambda: False, alive=lambda: process.poll() is None,
                       progress=tree_progress(process.pid))


def test_a_service_that_shows_no_progress_is_given_up_on_saying_so() -> None:
    process = spawn("import time; time.sleep(60)")  # alive, no CPU, no log
    try:
        with pytest.raises(StartFailed, match=r"^a hung service did not start: no CPU used and nothing logged for 1s"):
            wait_for_start("a hung service", lambda: False, alive=lambda: process.poll() is None,
                           progress=tree_progress(process.pid), stall_seconds=1)
    finally:
        process.kill()
        process.wait()


def test_the_bound_ends_a_wait_on_a_service_that_never_gets_ready() -> None:
    process = spawn("while True: pass")  # alive and busy for ever
    try:
        with pytest.raises(StartFailed, match=r"^a spinning service did not start within 1s, though it kept running"):
            wait_for_start("a spinning service", lambda: False, alive=lambda: process.poll() is None,
                           progress=tree_progress(process.pid), stall_seconds=60, bound_seconds=1)
    finally:
        process.kill()
        process.wait()
