"""What the job persists carries the version of its layout: the sink's marker value, its log
entry and what a checkpoint pins (the sink's settings, the query). A reader meeting a version it
does not know refuses it, naming where it met it, instead of guessing: a batch's fate must never
be decided from a misread record."""

from __future__ import annotations

import json
from typing import Any

from ..failures import JobFailure, Outcome
from ..storage.files import exists, filesystem, read_bytes, write_atomic


class UnknownFormat(JobFailure, ValueError):
    """A record the sink persisted in a layout this code does not know: no restart can read it."""

    outcome = Outcome.CANNOT_CONTINUE

    def __init__(self, where: str, found: object, known: int, older: tuple[int, ...] = ()) -> None:
        also = f" (and {', '.join(str(version) for version in older)})" if older else ""
        super().__init__(f"{where}: format version {found!r}, but this job reads version {known}{also}; it was "
                         "written by another version of the job. Run that version, or one that reads both.")
        self.where = where


def check_format(where: str, found: object, known: int, older: tuple[int, ...] = ()) -> None:
    """Refuse a record whose version is neither `known` (the one this code writes) nor one of the
    `older` ones it still reads (a record without one included)."""
    if found != known and found not in older:
        raise UnknownFormat(where, found, known, older)


def read_pinned_file(location: str, name: str, known: int) -> dict[str, Any] | None:
    """The fields of a small JSON file a checkpoint keeps (`<location>/<name>`), checked to be of
    layout `known`; None where the checkpoint has none."""
    fs, base = filesystem(location)
    path = f"{base}/{name}"
    if not exists(fs, path):
        return None
    fields: dict[str, Any] = json.loads(read_bytes(fs, path))
    check_format(path, fields.pop("format", None), known)
    return fields


def write_pinned_file(location: str, name: str, known: int, fields: dict[str, Any]) -> None:
    """Write such a file whole, or leave the old one (write_atomic)."""
    fs, base = filesystem(location)
    write_atomic(fs, f"{base}/{name}", json.dumps({"format": known, **fields}, indent=1, sort_keys=True).encode())
