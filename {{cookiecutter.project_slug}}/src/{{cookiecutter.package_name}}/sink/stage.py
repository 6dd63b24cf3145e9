"""Phase 1 (pre-commit), on executors: stage one task's output rows of batch N durably
under the checkpoint, as final Kafka bytes, and describe them in a commit message."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from ..storage import filesystem, read_bytes, write_atomic

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


def stage(checkpoint: str, sink_id: str, batch_id: int, partition: int, attempt: int, rows: pa.Table) -> StagedFile:
    """Write `rows` as one Arrow IPC file; the name carries the task attempt, so a retried
    task never overwrites a file another attempt may still be writing."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, STAGED_SCHEMA) as writer:
        writer.write_table(rows.cast(STAGED_SCHEMA))
    data = sink.getvalue().to_pybytes()
    fs, base = filesystem(checkpoint)
    relative = f"{staging_dir(sink_id, batch_id)}/{partition}-{attempt}.arrow"
    write_atomic(fs, f"{base}/{relative}", data)
    return StagedFile(path=relative, rows=rows.num_rows, sha256=hashlib.sha256(data).hexdigest())


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
