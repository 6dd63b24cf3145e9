"""Waiting for a service to start (a broker, a cluster's node, Spark's master and workers, the S3
server): as long as it lives and makes progress, up to a generous bound. A loaded machine makes
a start slow, never wrong: a fixed time-out gives up on a JVM that is still starting (seen with
a load of 11 on 2 cores), so the wait gives up only when the process has exited, when it has
shown no sign of progress (CPU time, log output) for `stall_seconds`, or past `bound_seconds`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Hashable
from pathlib import Path

from .processes import cpu_ticks, descendants

STALL_SECONDS = 120.0  # no CPU used and nothing logged for this long: the start hangs
BOUND_SECONDS = 900.0  # past this, a start is broken whatever the machine's load


class StartFailed(Exception):
    """The service exited, stalled or passed the bound; the message says which, and after how long."""


def tree_progress(pid: int | None, *logs: Path) -> Callable[[], Hashable]:
    """A sign of progress for a process (`pid` and every process below it): the CPU time they
    have used and the sizes of `logs`; it changes while the process does anything at all."""

    def progress() -> Hashable:
        ticks = 0
        if pid is not None:
            for member in (pid, *descendants(pid)):
                ticks += cpu_ticks(member) or 0
        sizes = tuple(os.path.getsize(log) if os.path.exists(log) else -1 for log in logs)
        return ticks, sizes

    return progress


def wait_for_start(what: str, ready: Callable[[], bool], *, alive: Callable[[], bool],
                   progress: Callable[[], Hashable], stall_seconds: float = STALL_SECONDS,
                   bound_seconds: float = BOUND_SECONDS, interval: float = 0.2) -> float:
    """Poll `ready` until it is true; the seconds it took. StartFailed, naming `what`, once
    `alive` is false, once `progress` has returned the same value for `stall_seconds`, or past
    `bound_seconds`. `ready` is asked once more after `alive` turns false: a service that
    answered and then exited is not ready."""
    started = time.monotonic()
    last_sign, last_change = progress(), started
    while True:
        if ready():
            return time.monotonic() - started
        now = time.monotonic()
        waited = now - started
        if not alive():
            raise StartFailed(f"{what} exited while starting ({waited:.0f}s after the wait began)")
        sign = progress()
        if sign != last_sign:
            last_sign, last_change = sign, now
        elif now - last_change >= stall_seconds:
            raise StartFailed(f"{what} did not start: no CPU used and nothing logged for {stall_seconds:.0f}s "
                              f"({waited:.0f}s after the wait began)")
        if waited >= bound_seconds:
            raise StartFailed(f"{what} did not start within {bound_seconds:.0f}s, though it kept running")
        time.sleep(interval)
