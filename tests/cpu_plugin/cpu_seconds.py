"""A pytest plugin for the rendered suites' lanes (rendered_lanes.py loads it with `-p`): each
test's wall-clock and CPU seconds (setup, call and teardown), the CPU read from the lane's
cgroup (cpu_accounts.py), one JSON line per test in the file CI_CPU_LOG names. The lane runs
one test at a time, so the cgroup's growth over a test is that test's (with the brokers and
sessions it shares, which the first test that needs them pays to start)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ACCOUNT, LOG, LANE = (os.environ.get(name, "") for name in ("CI_CPU_ACCOUNT", "CI_CPU_LOG", "CI_CPU_LANE"))


def cgroup_cpu_seconds(group: Path) -> float | None:
    """The CPU seconds a cgroup's processes have used: cgroup v1's cpuacct.usage (nanoseconds) or
    v2's cpu.stat usage_usec; None where the group has neither."""
    try:
        if (group / "cpuacct.usage").exists():
            return int((group / "cpuacct.usage").read_text()) / 1e9
        for line in (group / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
    except (OSError, ValueError):
        return None
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    started, cpu = time.monotonic(), cgroup_cpu_seconds(Path(ACCOUNT)) if ACCOUNT else None
    yield
    if not LOG:
        return
    after = cgroup_cpu_seconds(Path(ACCOUNT)) if ACCOUNT else None
    line = {"lane": LANE, "test": item.nodeid, "wall_s": round(time.monotonic() - started, 1),
            "cpu_s": None if cpu is None or after is None else round(after - cpu, 1)}
    with open(LOG, "a") as log:
        log.write(json.dumps(line) + "\n")
