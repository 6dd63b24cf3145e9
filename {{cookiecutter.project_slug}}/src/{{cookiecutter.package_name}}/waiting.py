"""Waiting for what takes its time, the one way the job does: ask again after a pause (growing
up to a cap where one is given) until the answer is the one wanted, or the time is up. A topic's
metadata just after it was created, the marker topic's stable offset, a commit that timed out, a
driver asked to stop: each is a `poll` or a `retry`. What is waited out within a tolerance, a
line said every few seconds (a Kafka outage, another producer's open transaction), is a
`Tolerance`'s."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from .failures import FailureVerdict, Outcome, verdict

log = logging.getLogger(__name__)

T = TypeVar("T")
LOG_EVERY_SECONDS = 5.0


def poll(ask: Callable[[], T], done: Callable[[T], bool], timeout: float, pause: float = 0.2,
         max_pause: float | None = None) -> T:
    """`ask()` until `done` says its answer is the one wanted, or `timeout` seconds have passed:
    the last answer, which the caller judges."""
    deadline = time.monotonic() + timeout
    while True:
        answer = ask()
        if done(answer) or time.monotonic() >= deadline:
            return answer
        time.sleep(pause)
        pause = pause if max_pause is None else min(pause * 2, max_pause)


def retry(attempt: Callable[[], T], retriable: Callable[[Exception], bool], timeout: float, pause: float = 0.2,
          max_pause: float | None = None, retrying: Callable[[], None] = lambda: None) -> T:
    """`attempt()` until it returns. A failure that `retriable` calls worth another try is tried
    again after a pause (`retrying` told first), while the next try starts within `timeout`
    seconds; any other failure, or one past the time, goes up as it is."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return attempt()
        except Exception as error:
            if not retriable(error) or time.monotonic() + pause >= deadline:
                raise
        retrying()
        time.sleep(pause)
        pause = pause if max_pause is None else min(pause * 2, max_pause)


class Tolerance:
    """Waits something out for at most `seconds` (a Kafka outage, another producer's open
    transaction), saying so in one line every LOG_EVERY_SECONDS: the one loop of "wait within a
    tolerance" the job has. `what`: what the job does meanwhile, for its lines (or a function that
    says it, asked only when a line is due); `stop`: set when the job stops; the wait gives up at once."""

    def __init__(self, what: str | Callable[[], str], seconds: float, stop: threading.Event | None = None,
                 log_every: float = LOG_EVERY_SECONDS, event_kind: str = "waiting", quiet_for: float = 0.0) -> None:
        self.what = what
        self.event_kind = event_kind
        self.quiet_for = quiet_for  # nothing is said before this many seconds (a wait about to end)
        self.seconds = seconds
        self.stop = stop
        self.log_every = log_every
        self.since: float | None = None
        self._logged = 0.0

    def waited(self) -> float:
        return 0.0 if self.since is None else time.monotonic() - self.since

    def reset(self) -> None:
        self.since = None

    def pause(self, reason: str | Callable[[float], None], seconds: float) -> bool:
        """Start (or go on) waiting: say so when due, sleep `seconds`. False when the tolerance is
        spent or a stop came: give up. `reason`: what is waited out, for the standard line; or a
        function given the seconds waited that logs a line of its own (called only when due)."""
        now = time.monotonic()
        self.since = self.since if self.since is not None else now
        waited = now - self.since
        if waited > self.seconds:
            return False
        if now - self._logged >= self.log_every and waited >= self.quiet_for:
            self._logged = now
            if callable(reason):
                reason(waited)
            else:
                log.warning("%s for %.0fs (tolerance %.0fs): %s", reason, waited, self.seconds, self._what(),
                            extra={"event": {"event": self.event_kind, "reason": reason, "seconds": round(waited),
                                             "tolerance_seconds": self.seconds}})
        if self.stop is not None:
            return not self.stop.wait(seconds)
        time.sleep(seconds)
        return True

    def _what(self) -> str:
        return self.what() if callable(self.what) else self.what

    def run(self, attempt: Callable[[], T], past: Callable[[FailureVerdict, float], BaseException],
            retry_pause: float = 2.0, reason: Callable[[FailureVerdict], str] = lambda judged: judged.message) -> T:
        """`attempt()` until it returns; a failure that rides out (its verdict) is tried again
        within the tolerance; past it, `past(verdict, seconds waited)` is raised instead (one line,
        no traceback); any other failure is raised as it is."""
        while True:
            try:
                result = attempt()
            except Exception as error:
                judged = verdict(error)
                if judged.outcome is not Outcome.RIDE_OUT:
                    raise
                if not self.pause(reason(judged), retry_pause):
                    raise past(judged, self.waited()) from None
                continue
            if self.since is not None:
                log.warning("%s: done after %.0fs of waiting", self._what(), self.waited())
            self.reset()
            return result
