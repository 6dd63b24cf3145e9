"""The sink log: one entry per batch, `<checkpoint>/sinks/<sink>/log/<N>.json`, written
before Kafka is touched. It is the coordinator's record of what batch N publishes."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum

from ..failures import JobFailure, Outcome
from ..storage import object_store
from ..storage.checkpoint import SourceOffsets
from ..storage.files import exists, filesystem, list_names, read_bytes, write_atomic
from ..storage.layout_versions import UnknownFormat, check_format

log = logging.getLogger(__name__)

def sink_dir(sink_id: str) -> str:
    """The sink's own directory, relative to the checkpoint."""
    return f"sinks/{sink_id}"


# The entry's layout; a reader refuses an entry of a version it does not know. Version 1 is
# version 2 but for its digests, which hash each value with its batch id (version 2's leave it
# out: the sink stamps the batch id after hashing, batch_records.with_batch_id);
# recovery.rerun_mismatch compares a re-run against a version 1 entry by row count alone.
LOG_FORMAT = 2
DIGESTS_WITH_BATCH_ID = 1


class Status(StrEnum):
    PREPARED = "prepared"  # written before Kafka is touched: the batch may be published in part
    COMMITTED = "committed"  # every shard's transaction committed


PREPARED = Status.PREPARED
COMMITTED = Status.COMMITTED


@dataclass(frozen=True)
class LogEntry:
    """A value: its one move, prepared -> committed, gives the next entry (`committed`)."""

    batch_id: int
    status: Status
    transactional_ids: list[str]
    records_per_shard: list[int] = field(default_factory=list)
    # Per shard, an order-independent digest of its records (batch_records.digests): a re-run of
    # the batch is compared with the first attempt by count and digest.
    digests_per_shard: list[str] = field(default_factory=list)
    source_offsets: SourceOffsets = field(default_factory=SourceOffsets)
    records: int = 0
    prepared_at: float | None = None
    committed_at: float | None = None
    format: int = LOG_FORMAT

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))  # a status the log does not know is refused

    def committed(self, at: float) -> LogEntry:
        """The entry once every shard's transaction committed; a committed entry stays as it is."""
        return self if self.status is COMMITTED else replace(self, status=COMMITTED, committed_at=at)

    def to_json(self) -> bytes:
        fields_ = {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps({**fields_, "status": self.status.value, "source_offsets": self.source_offsets.to_json()},
                          indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str = "sink log entry") -> LogEntry:
        fields_ = json.loads(data)
        check_format(where, fields_.get("format"), LOG_FORMAT, older=(DIGESTS_WITH_BATCH_ID,))
        return cls(**{**fields_, "source_offsets": SourceOffsets.from_json(fields_["source_offsets"])})


class SinkLogConflict(JobFailure, RuntimeError):
    """Another driver wrote this batch's log entry between this driver's read and its write. The
    restart reads the log again; if another driver does run, Kafka's fencing stops one of them."""

    outcome = Outcome.RETRY


class SinkLog:
    """The sink's log of one checkpoint. Its directory is listed once per instance (the
    coordinator makes one per batch, and is the log's only writer), then kept up to date by
    this instance's own writes and deletions: a batch's commit lists it once, not per step."""

    def __init__(self, checkpoint: str, sink_id: str) -> None:
        self.fs, base = filesystem(checkpoint)
        self.directory = f"{base}/{sink_dir(sink_id)}/log"
        self._batch_ids: set[int] | None = None

    def _path(self, batch_id: int) -> str:
        return f"{self.directory}/{batch_id}.json"

    def read(self, batch_id: int) -> LogEntry | None:
        """The entry of batch N; None if there is none, or if it cannot be read (a file left
        empty or cut short by a power loss on a disk that lied about its writes): the batch
        markers in Kafka then decide whether N was published, as they do for a missing entry."""
        path = self._path(batch_id)
        if batch_id not in self._listed() or not exists(self.fs, path):
            return None
        data = read_bytes(self.fs, path)
        try:
            return LogEntry.from_json(data, f"sink log entry {path}")
        except UnknownFormat:
            raise
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
        if current is not None and current.status is COMMITTED and current != entry:
            raise RuntimeError(f"sink log: batch {entry.batch_id} is already committed; refusing to overwrite it")
        if self.fs.type_name != "s3":
            write_atomic(self.fs, path, entry.to_json())
        else:
            try:
                object_store.put_if_unchanged(path, entry.to_json(), seen)
            except object_store.ConditionalWriteFailed as error:
                raise SinkLogConflict(f"sink log: batch {entry.batch_id}: {error}; is another job running with "
                                      "this sink_id?") from None
        self._listed().add(entry.batch_id)

    def _listed(self) -> set[int]:
        if self._batch_ids is None:
            self._batch_ids = {int(name.split(".")[0]) for name in list_names(self.fs, self.directory)
                               if name.endswith(".json") and name.split(".")[0].isdigit()}
        return self._batch_ids

    def batch_ids(self) -> list[int]:
        return sorted(self._listed())

    def forget_before(self, batch_id: int) -> None:
        """Delete the entries of batches before `batch_id`: the markers and commits/N settle them."""
        for old in self.batch_ids():
            if old < batch_id:
                self.fs.delete_file(self._path(old))
                self._listed().discard(old)

    def latest_before(self, batch_id: int) -> LogEntry | None:
        """The newest readable entry of a batch before `batch_id` (an empty batch writes none)."""
        for earlier in reversed([b for b in self.batch_ids() if b < batch_id]):
            if (entry := self.read(earlier)) is not None:
                return entry
        return None

    def latest(self, count: int = 10) -> list[LogEntry]:
        return [entry for batch in self.batch_ids()[-count:] if (entry := self.read(batch)) is not None]
