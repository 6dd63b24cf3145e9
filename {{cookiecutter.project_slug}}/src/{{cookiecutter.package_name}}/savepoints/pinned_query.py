"""The query a checkpoint's state was computed by, kept in it (`<checkpoint>/query.json`): its
fingerprint (pipeline/fingerprint.py). A start with a query that computes something else is
refused, naming checkpoint_location: the state would be read with another meaning, silently."""

from __future__ import annotations

import json

from ..failures import ConfigError
from ..sink.formats import check_format
from ..storage import checkpoint
from ..storage.files import exists, filesystem, read_bytes, write_atomic

FILE = "query.json"
PINNED_FORMAT = 1  # the file's layout (sink/formats.py)


def read_pinned(location: str) -> str | None:
    """The fingerprint the checkpoint's query had, if it recorded one."""
    fs, base = filesystem(location)
    path = f"{base}/{FILE}"
    if not exists(fs, path):
        return None
    fields = json.loads(read_bytes(fs, path))
    check_format(path, fields.pop("format", None), PINNED_FORMAT)
    return str(fields["fingerprint"])


def check_and_pin(location: str, fingerprint: str) -> bool:
    """Refuse a query other than the checkpoint's; record it where none is recorded (a new
    checkpoint, or one older than the record). Returns True where an existing checkpoint had no
    record: its query could not be checked this once."""
    recorded = read_pinned(location)
    if recorded == fingerprint:
        return False
    if recorded is not None:
        raise ConfigError("checkpoint_location", f"{location} holds the state of another query (fingerprint "
                          f"{recorded}; pipeline/query.py now computes {fingerprint}): resumed, the new query "
                          "would go on from the old one's answers. Start it on a new checkpoint_location with a "
                          "new sink_id, or put the old query back.")
    existing = not checkpoint.is_new(location)
    fs, base = filesystem(location)
    write_atomic(fs, f"{base}/{FILE}", json.dumps({"format": PINNED_FORMAT, "fingerprint": fingerprint}).encode())
    return existing
