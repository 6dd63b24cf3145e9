"""The driver's heartbeat in its checkpoint, and the stop requests it watches for there (the
files: driver_presence.py).

It also tells a zombie. A driver frozen for a while (a long GC pause, a stalled VM, a network
partition) may find, once it wakes, that an orchestrator started a replacement on its checkpoint
meanwhile: the heartbeat file is then another driver's, fresh, of a driver started later. The
older one yields (`on_taken_over`) and writes no heartbeat any more: the newer one's producers
fenced its transactional ids already, and a restart of its query would fence them back."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from ..storage.driver_presence import ALIVE_WITHIN_SECONDS, HEARTBEAT, STOP_REQUEST, clear_stop_request, delete, read
from ..storage.files import filesystem, write_atomic

HEARTBEAT_SECONDS = 5.0
# A driver that could not write its heartbeat for this long stops itself: soon `savepoint create`
# would take it for gone and fence it while it runs.
STOP_AFTER_FAILING_SECONDS = ALIVE_WITHIN_SECONDS - 2 * HEARTBEAT_SECONDS

log = logging.getLogger(__name__)


class Heartbeat(threading.Thread):
    """Keeps the driver's heartbeat and watches for a stop request, which it passes to `on_stop`."""

    def __init__(self, location: str, on_stop: Callable[[str], None], on_lost: Callable[[str], None],
                 interval: float = HEARTBEAT_SECONDS, stop_after: float = STOP_AFTER_FAILING_SECONDS,
                 details: Callable[[], dict[str, Any]] = dict,
                 on_taken_over: Callable[[str], None] | None = None) -> None:
        super().__init__(name="driver-heartbeat", daemon=True)
        self.location = location
        self.on_stop = on_stop
        self.on_lost = on_lost  # the heartbeat failed for `stop_after` seconds: the job must stop
        self.interval = interval
        self.stop_after = stop_after
        self.details = details  # read at each beat, written with it
        self.on_taken_over = on_taken_over or on_lost  # a newer driver runs on the checkpoint
        self.started_at = time.time()
        self.beat = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": self.started_at}
        self.done = threading.Event()

    def newer_driver(self) -> str | None:
        """Another driver that started after this one and beats on the checkpoint now, described;
        None when there is none (the file is this driver's, stale, or absent)."""
        found = read(self.location, HEARTBEAT)
        if found is None or {name: found.get(name) for name in self.beat} == self.beat:
            return None
        fresh = time.time() - float(found.get("at", 0)) <= ALIVE_WITHIN_SECONDS
        if not fresh or float(found.get("started_at", 0)) <= self.started_at:
            return None
        return (f"a newer driver runs on {self.location} (host {found.get('host')}, pid {found.get('pid')}, started "
                f"{float(found['started_at']) - self.started_at:.0f}s after this one): this one was taken for gone")

    def run(self) -> None:
        written = time.monotonic()
        lost = False
        while not self.done.is_set():
            try:
                if (newer := self.newer_driver()) is not None:
                    self.on_taken_over(newer)
                    return  # its heartbeat is the newer driver's now: never overwritten
                fs, base = filesystem(self.location)
                payload = {**self.beat, **self.details(), "at": time.time()}
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
        request = read(self.location, STOP_REQUEST)
        if request is None:
            return
        if float(request.get("at", 0)) < self.started_at:
            log.warning("deleting a stop request older than this driver (%s): its requester is gone",
                        request.get("reason"))
            clear_stop_request(self.location)
            return
        self.on_stop(str(request.get("reason", "stop requested")))

    def stop(self) -> None:
        """The driver exits: no heartbeat any more (a killed driver's goes stale instead; a newer
        driver's stays)."""
        self.done.set()
        self.join(timeout=10)
        if self.newer_driver() is None:
            delete(self.location, HEARTBEAT)
