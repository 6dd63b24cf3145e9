"""Progress lines of a chaos run, each with the seconds since it began."""

from __future__ import annotations

import time
from typing import TextIO


class Reporter:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __call__(self, message: str) -> None:
        self.line(f"chaos: [{self.elapsed():7.1f}s] {message}")

    def line(self, text: str) -> None:
        print(text, file=self.out, flush=True)
