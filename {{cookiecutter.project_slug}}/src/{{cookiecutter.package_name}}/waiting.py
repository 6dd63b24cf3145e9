"""Waiting for what takes its time, the one way the job does: ask again after a pause (growing
up to a cap where one is given) until the answer is the one wanted, or the time is up. A topic's
metadata just after it was created, the marker topic's stable offset, a commit that timed out, a
driver asked to stop: each is a `poll` or a `retry`. (Waiting out an outage within a tolerance,
with its log lines, is failures.Tolerance's.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


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
