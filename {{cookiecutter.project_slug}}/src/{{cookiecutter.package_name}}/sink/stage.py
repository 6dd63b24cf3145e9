"""Phase 1 (pre-commit), on executors: stage one task's output rows of batch N durably
under the checkpoint, as final Kafka bytes, and describe them in a commit message."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import BinaryIO

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from ..storage import filesystem, open_atomic, read_bytes

# What is staged: exactly what phase 2 produces, so the coordinator only reads and produces.
STAGED_SCHEMA = pa.schema([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary())])


@dataclass(frozen=True)
class StagedFile(WriterCommitMessage):
    """The commit message of one sink task: where its part of the batch is, and how to check it."""

    path: str
    rows: int
    sha256: str


def sink_dir(sink_id: str) -> str:
    """The sink's own directory, relative to the checkpoint."""
    return f"sinks/{sink_id}"


def staging_dir(sink_id: str, batch_id: int) -> str:
    return f"{sink_dir(sink_id)}/staging/{batch_id}"


def stage(checkpoint: str, sink_id: str, batch_id: int, partition: int, attempt: int,
          rows: pa.Table | Iterable[pa.RecordBatch]) -> StagedFile | None:
    """Write `rows` as one Arrow IPC file, batch by batch as they come (a task never holds its
    whole output), with its checksum computed on the way; None when there are no rows. The
    name carries the task attempt, so a retried task never overwrites a file another attempt
    may still be writing."""
    batches = rows.to_batches() if isinstance(rows, pa.Table) else rows
    pending = (batch for batch in batches if batch.num_rows)
    first = next(pending, None)
    if first is None:
        return None
    fs, base = filesystem(checkpoint)
    relative = f"{staging_dir(sink_id, batch_id)}/{partition}-{attempt}.arrow"
    count = 0
    with open_atomic(fs, f"{base}/{relative}") as out:
        hashing = _Hashing(out)
        with pa.ipc.new_file(pa.PythonFile(hashing, mode="w"), STAGED_SCHEMA) as writer:
            for batch in itertools.chain([first], pending):
                columns = [batch.column(field.name).cast(field.type) for field in STAGED_SCHEMA]
                writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=STAGED_SCHEMA))
                count += batch.num_rows
    return StagedFile(path=relative, rows=count, sha256=hashing.digest.hexdigest())


class _Hashing:
    """A write-only file that passes bytes on and hashes them."""

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.digest, self.closed = out, hashlib.sha256(), False

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:  # the IPC writer closes its sink; open_atomic closes the real file
        self.closed = True

    def writable(self) -> bool:
        return True


class StagedFileCorrupt(RuntimeError):
    """A staged file does not match its commit message: the storage lost or changed it."""


def read_staged(checkpoint: str, staged: StagedFile) -> pa.Table:
    fs, base = filesystem(checkpoint)
    data = read_bytes(fs, f"{base}/{staged.path}")
    # Paranoid: a mismatch means storage is not durable as promised; publishing it would be wrong.
    if hashlib.sha256(data).hexdigest() != staged.sha256:
        raise StagedFileCorrupt(f"{staged.path}: checksum differs from the one its task reported")
    table = pa.ipc.open_file(pa.BufferReader(data)).read_all()
    if table.num_rows != staged.rows:
        raise StagedFileCorrupt(f"{staged.path}: {table.num_rows} rows, its task reported {staged.rows}")
    return table
