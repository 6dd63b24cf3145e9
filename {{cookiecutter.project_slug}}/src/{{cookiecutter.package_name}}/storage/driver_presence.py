"""A running driver's presence in its checkpoint, and stop requests to it: the files, which the
driver keeps (its Heartbeat, heartbeat.py) and the commands read and write (`status`, `savepoint`).

`savepoint create` must know whether a job runs on the checkpoint (then it asks the job to stop
at a batch boundary and waits) or not (then it reads the checkpoint as it is). The checkpoint is
the one place both see on a cluster too, so the driver keeps a heartbeat file there, and a stop
request is a file there as well:

    <checkpoint>/driver-heartbeat.json   {"host", "pid", "started_at", "at"} and what the runner
                                         adds (a Kafka outage it waits out), rewritten every 5 s,
                                         deleted when the driver exits cleanly
    <checkpoint>/stop-request.json       {"reason", "at"}, written by `savepoint create`

A request older than the driver's start is stale (left by a `savepoint create` that was cut
short) and is deleted, not obeyed: a new job must not stop at its first look.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

from ..waiting import poll
from .files import exists, filesystem, read_bytes, write_atomic

HEARTBEAT = "driver-heartbeat.json"
STOP_REQUEST = "stop-request.json"
# A heartbeat older than this is a driver that is gone (killed, or its host lost).
ALIVE_WITHIN_SECONDS = 30.0


def read(location: str, name: str) -> dict[str, Any] | None:
    fs, base = filesystem(location)
    path = f"{base}/{name}"
    if not exists(fs, path):
        return None
    try:
        return json.loads(read_bytes(fs, path))
    except (ValueError, FileNotFoundError):
        return None  # deleted or being replaced meanwhile


def delete(location: str, name: str) -> None:
    fs, base = filesystem(location)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(f"{base}/{name}")


def running_driver(location: str, now: float | None = None) -> dict[str, Any] | None:
    """The heartbeat of a driver running on the checkpoint, or None."""
    beat = read(location, HEARTBEAT)
    if beat is None or (now or time.time()) - float(beat.get("at", 0)) > ALIVE_WITHIN_SECONDS:
        return None
    return beat


def request_stop(location: str, reason: str) -> None:
    fs, base = filesystem(location)
    write_atomic(fs, f"{base}/{STOP_REQUEST}", json.dumps({"reason": reason, "at": time.time()}).encode())


def clear_stop_request(location: str) -> None:
    delete(location, STOP_REQUEST)


def wait_until_stopped(location: str, timeout: float, progress: Callable[[str], None]) -> None:
    def running() -> dict[str, Any] | None:
        beat = running_driver(location)
        if beat is not None:
            progress(f"waiting for the job (pid {beat.get('pid')} on {beat.get('host')}) to stop at a batch boundary")
        return beat

    if (beat := poll(running, lambda found: found is None, timeout, pause=1.0)) is not None:
        raise TimeoutError(f"the job (pid {beat.get('pid')} on {beat.get('host')}) did not stop within "
                           f"{timeout:.0f}s; it stops at the end of the batch it is running")
