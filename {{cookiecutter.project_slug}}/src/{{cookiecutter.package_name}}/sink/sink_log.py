"""The sink log: one entry per batch, `<checkpoint>/sinks/<sink>/log/<N>.json`, written
before Kafka is touched. It is the coordinator's record of what batch N publishes."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field

from .. import object_store
from ..storage import exists, filesystem, list_names, read_bytes, write_atomic

log = logging.getLogger(__name__)

def sink_dir(sink_id: str) -> str:
    """The sink's own directory, relative to the checkpoint."""
    return f"sinks/{sink_id}"


PREPARED = "prepared"
COMMITTED = "committed"


@dataclass
class LogEntry:
    batch_id: int
    status: str
    transactional_ids: list[str]
    records_per_shard: list[int] = field(default_factory=list)
    source_offsets: dict = field(default_factory=dict)
    records: int = 0
    prepared_at: float | None = None
    committed_at: float | None = None

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LogEntry:
        return cls(**json.loads(data))


class SinkLogConflict(RuntimeError):
    """Another driver wrote this batch's log entry between this driver's read and its write."""


class SinkLog:
    def __init__(self, checkpoint: str, sink_id: str) -> None:
        self.fs, base = filesystem(checkpoint)
        self.directory = f"{base}/{sink_dir(sink_id)}/log"

    def _path(self, batch_id: int) -> str:
        return f"{self.directory}/{batch_id}.json"

    def read(self, batch_id: int) -> LogEntry | None:
        """The entry of batch N; None if there is none, or if it cannot be read (a file left
        empty or cut short by a power loss on a disk that lied about its writes): the batch
        markers in Kafka then decide whether N was published, as they do for a missing entry."""
        path = self._path(batch_id)
        if not exists(self.fs, path):
            return None
        data = read_bytes(self.fs, path)
        try:
            return LogEntry.from_json(data)
        except (ValueError, TypeError, KeyError) as error:
            log.warning("sink log: entry %s is unreadable (%d bytes: %s); the batch markers decide", path,
                        len(data), error)
            return None

    def write(self, entry: LogEntry) -> None:
        """Write atomically. A committed entry is never replaced: that batch is published.

        On S3 the write is conditional on the entry being as this driver just read it (absent,
        or that ETag): two drivers of one sink cannot both move batch N on, the second fails
        with SinkLogConflict. (Kafka's fencing stops the older one too; this holds even before
        either reaches Kafka.) Elsewhere a rename makes the write atomic."""
        path = self._path(entry.batch_id)
        seen = object_store.etag(path) if self.fs.type_name == "s3" else None
        current = self.read(entry.batch_id)
        if current is not None and current.status == COMMITTED and current != entry:
            raise RuntimeError(f"sink log: batch {entry.batch_id} is already committed; refusing to overwrite it")
        if self.fs.type_name != "s3":
            write_atomic(self.fs, path, entry.to_json())
            return
        try:
            object_store.put_if_unchanged(path, entry.to_json(), seen)
        except object_store.ConditionalWriteFailed as error:
            raise SinkLogConflict(f"sink log: batch {entry.batch_id}: {error}; is another job running with this "
                                  "sink_id?") from None

    def batch_ids(self) -> list[int]:
        return sorted(int(name.split(".")[0]) for name in list_names(self.fs, self.directory) if name.endswith(".json"))

    def forget_before(self, batch_id: int) -> None:
        """Delete the entries of batches before `batch_id`: the markers and commits/N settle them."""
        for old in self.batch_ids():
            if old < batch_id:
                self.fs.delete_file(self._path(old))

    def latest(self, count: int = 10) -> list[LogEntry]:
        return [entry for batch in self.batch_ids()[-count:] if (entry := self.read(batch)) is not None]
