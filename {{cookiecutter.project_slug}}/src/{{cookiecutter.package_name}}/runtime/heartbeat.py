"""A running driver's presence in its checkpoint, and stop requests to it.

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
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..storage import exists, filesystem, read_bytes, write_atomic

HEARTBEAT = "driver-heartbeat.json"
STOP_REQUEST = "stop-request.json"
HEARTBEAT_SECONDS = 5.0
# A heartbeat older than this is a driver that is gone (killed, or its host lost).
ALIVE_WITHIN_SECONDS = 30.0
# A driver that could not write its heartbeat for this long stops itself: soon `savepoint create`
# would take it for gone and fence it while it runs.
STOP_AFTER_FAILING_SECONDS = ALIVE_WITHIN_SECONDS - 2 * HEARTBEAT_SECONDS

log = logging.getLogger(__name__)


def _read(location: str, name: str) -> dict[str, Any] | None:
    fs, base = filesystem(location)
    path = f"{base}/{name}"
    if not exists(fs, path):
        return None
    try:
        return json.loads(read_bytes(fs, path))
    except (ValueError, FileNotFoundError):
        return None  # deleted or being replaced meanwhile


def _delete(location: str, name: str) -> None:
    fs, base = filesystem(location)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(f"{base}/{name}")


def running_driver(location: str, now: float | None = None) -> dict[str, Any] | None:
    """The heartbeat of a driver running on the checkpoint, or None."""
    beat = _read(location, HEARTBEAT)
    if beat is None or (now or time.time()) - float(beat.get("at", 0)) > ALIVE_WITHIN_SECONDS:
        return None
    return beat


def request_stop(location: str, reason: str) -> None:
    fs, base = filesystem(location)
    write_atomic(fs, f"{base}/{STOP_REQUEST}", json.dumps({"reason": reason, "at": time.time()}).encode())


def clear_stop_request(location: str) -> None:
    _delete(location, STOP_REQUEST)


def wait_until_stopped(location: str, timeout: float, progress: Callable[[str], None]) -> None:
    deadline = time.monotonic() + timeout
    while (beat := running_driver(location)) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the job (pid {beat.get('pid')} on {beat.get('host')}) did not stop within "
                               f"{timeout:.0f}s; it stops at the end of the batch it is running")
        progress(f"waiting for the job (pid {beat.get('pid')} on {beat.get('host')}) to stop at a batch boundary")
        time.sleep(1.0)


class Heartbeat(threading.Thread):
    """Keeps the driver's heartbeat and watches for a stop request, which it passes to `on_stop`."""

    def __init__(self, location: str, on_stop: Callable[[str], None], on_lost: Callable[[str], None],
                 interval: float = HEARTBEAT_SECONDS, stop_after: float = STOP_AFTER_FAILING_SECONDS,
                 details: Callable[[], dict[str, Any]] = dict) -> None:
        super().__init__(name="driver-heartbeat", daemon=True)
        self.location = location
        self.on_stop = on_stop
        self.on_lost = on_lost  # the heartbeat failed for `stop_after` seconds: the job must stop
        self.interval = interval
        self.stop_after = stop_after
        self.details = details  # read at each beat, written with it
        self.started_at = time.time()
        self.done = threading.Event()

    def run(self) -> None:
        beat = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": self.started_at}
        written = time.monotonic()
        lost = False
        while not self.done.is_set():
            try:
                fs, base = filesystem(self.location)
                payload = {**beat, **self.details(), "at": time.time()}
                write_atomic(fs, f"{base}/{HEARTBEAT}", json.dumps(payload).encode())
                written = time.monotonic()
                self._check_request()
            except Exception as error:  # noqa: BLE001 - whatever it is, the next beat tries again
                failing = time.monotonic() - written
                log.warning("driver heartbeat: %s: %s (no heartbeat written for %.0fs)", type(error).__name__, error,
                            failing)
                if failing >= self.stop_after and not lost:
                    lost = True
                    self.on_lost(f"the driver's heartbeat in {self.location} could not be written for {failing:.0f}s "
                                 f"(last error: {type(error).__name__}: {error}); past {ALIVE_WITHIN_SECONDS:.0f}s a "
                                 "savepoint would take this job for stopped")
            self.done.wait(self.interval)

    def _check_request(self) -> None:
        request = _read(self.location, STOP_REQUEST)
        if request is None:
            return
        if float(request.get("at", 0)) < self.started_at:
            log.warning("deleting a stop request older than this driver (%s): its requester is gone",
                        request.get("reason"))
            clear_stop_request(self.location)
            return
        self.on_stop(str(request.get("reason", "stop requested")))

    def stop(self) -> None:
        """The driver exits: no heartbeat any more (a killed driver's goes stale instead)."""
        self.done.set()
        self.join(timeout=10)
        _delete(self.location, HEARTBEAT)
