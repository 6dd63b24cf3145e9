"""The query a checkpoint's state was computed by, kept in it (`<checkpoint>/query.json`): its
fingerprint (pipeline/fingerprint.py). A start with a query that computes something else is
refused, naming checkpoint_location: the state would be read with another meaning, silently."""

from __future__ import annotations

from ..failures import ConfigError
from ..storage import checkpoint
from ..storage.layout_versions import read_pinned_file, write_pinned_file

FILE = "query.json"
PINNED_FORMAT = 1  # the file's layout (storage/layout_versions.py)


def read_pinned(location: str) -> str | None:
    """The fingerprint the checkpoint's query had, if it recorded one."""
    fields = read_pinned_file(location, FILE, PINNED_FORMAT)
    return None if fields is None else str(fields["fingerprint"])


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
    write_pinned_file(location, FILE, PINNED_FORMAT, {"fingerprint": fingerprint})
    return existing
