"""What the sink persists carries the version of its layout: the marker value, the sink log
entry and the pinned settings. A reader meeting a version it does not know refuses it, naming
where it met it, instead of guessing: a batch's fate must never be decided from a misread record."""

from __future__ import annotations

from ..failures import JobFailure, Outcome


class UnknownFormat(JobFailure, ValueError):
    """A record the sink persisted in a layout this code does not know: no restart can read it."""

    outcome = Outcome.HALT

    def __init__(self, where: str, found: object, known: int) -> None:
        super().__init__(f"{where}: format version {found!r}, but this job reads version {known}; it was written by "
                         "another version of the job. Run that version, or one that reads both.")
        self.where = where


def check_format(where: str, found: object, known: int) -> None:
    """Refuse a record whose version is not `known` (a record without one included)."""
    if found != known:
        raise UnknownFormat(where, found, known)
