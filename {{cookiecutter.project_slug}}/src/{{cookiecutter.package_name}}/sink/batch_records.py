"""What phase 1 hands phase 2: a batch's Kafka records, per commit shard, in chunks.

A batch comes in parts (the query's output, then the records its references name), each in one
of two forms, so that a batch of any size fits the driver:
- inline (the common case): Spark hands the part to the driver as Arrow (`toArrow`); the
  driver holds it, at most `spark.driver.maxResultSize` (Spark's default 1g);
- staged: a part past that size (say a flood of 64 KiB dead letters) fails to collect; the
  executors then write it as Parquet under the checkpoint (`sinks/<sink>/staging/<N>/<part>`),
  and phase 2 streams it from there, one chunk at a time. Spark computes the part again for
  that (the output from the same shuffle and state version: a second action on the batch, as
  Spark's foreachBatch documentation allows), so the records are the same. The batches of a
  backlog are alike (maxOffsetsPerTrigger), so after a part too large for the driver the next
  batch's part is staged at once, computed once (StagingForecast), until one would have fit.

Either way the driver holds one chunk of Python objects at a time while it produces.

Each shard's records come with an order-independent digest (a sum of per-record hashes), so that
a re-run of the batch can be compared with its first attempt (coordinator.py).

Records without a topic are *references*: not published, but handed to the job, which turns them
into more records of the same batch (its dead letters, read back; dead_letter_readback.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from ..storage.files import exists, filesystem
from .sink_log import sink_dir

# The records' schema: what the sink is given and produces as it is.
RECORDS_SCHEMA = pa.schema([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary())])
# With several commit shards, each record's shard (kafka_sink.for_commit); without, shard 0.
SHARD = "commit_shard"
# Each record's 64-bit hash over topic, key and value, computed by the executors (kafka_sink.with_digest).
DIGEST = "record_digest"
PRODUCE_CHUNK_ROWS = 65_536
# Spark's message when a job's results exceed spark.driver.maxResultSize (TaskSetManager).
RESULT_TOO_LARGE = "is bigger than spark.driver.maxResultSize"


@dataclass(frozen=True)
class InlineRecords:
    """The batch on the driver, split by shard."""

    parts: list[pa.Table]
    references: list[bytes] = field(default_factory=list)
    digests: list[int] = field(default_factory=list)  # per shard
    staged = False

    @classmethod
    def of(cls, table: pa.Table, shards: int) -> InlineRecords:
        topic = table.column("topic")
        references = [] if topic.null_count == 0 else table.filter(pc.is_null(topic)).column("key").to_pylist()
        published = table if topic.null_count == 0 else table.filter(pc.is_valid(topic))
        parts = split_by_shard(published, shards)
        return cls([_as_records(part) for part in parts], references, [digest(part) for part in parts])

    @property
    def rows_per_shard(self) -> list[int]:
        return [part.num_rows for part in self.parts]

    def chunks(self, shard: int) -> Iterator[pa.RecordBatch]:
        yield from self.parts[shard].to_batches(max_chunksize=PRODUCE_CHUNK_ROWS)


@dataclass(frozen=True)
class StagedRecords:
    """The batch as Parquet files that the executors wrote, one directory per shard."""

    fs: pafs.FileSystem
    files: list[list[str]]  # per shard
    rows_per_shard: list[int]
    references: list[bytes]
    size_bytes: int  # of its files
    digests: list[int]
    uncompressed_bytes: int = 0  # of its columns' data (Parquet's row group sizes): what collecting it would carry
    staged = True

    @classmethod
    def read(cls, location: str, shards: int) -> StagedRecords:
        fs, directory = filesystem(location)
        files = [_parquet_files(fs, directory if shards == 1 else f"{directory}/{SHARD}={shard}")
                 for shard in range(shards)]
        rows = [0] * shards
        digests = [0] * shards
        references: list[bytes] = []
        size = uncompressed = 0
        for shard, paths in enumerate(files):  # one pass over each file's topic, key and digest columns
            for path in paths:
                with fs.open_input_file(path) as source:
                    parquet = pq.ParquetFile(source)
                    size += source.size()
                    uncompressed += sum(parquet.metadata.row_group(i).total_byte_size
                                        for i in range(parquet.metadata.num_row_groups))
                    for chunk in parquet.iter_batches(PRODUCE_CHUNK_ROWS, columns=["topic", "key", DIGEST]):
                        unpublished = pc.is_null(chunk.column("topic"))
                        references += chunk.filter(unpublished).column("key").to_pylist()
                        rows[shard] += chunk.num_rows - pc.sum(unpublished.cast(pa.int64())).as_py()
                        digests[shard] = combine(digests[shard], digest(chunk.filter(pc.invert(unpublished))))
        return cls(fs, files, rows, references, size, digests, uncompressed)

    def chunks(self, shard: int) -> Iterator[pa.RecordBatch]:
        for path in self.files[shard]:
            for chunk in _batches(self.fs, path, RECORDS_SCHEMA.names):
                yield chunk.filter(pc.is_valid(chunk.column("topic"))).cast(RECORDS_SCHEMA)


@dataclass(frozen=True)
class CombinedRecords:
    """A batch's records from several parts: its output, then the records its references named."""

    parts: list[InlineRecords | StagedRecords]
    references: list[bytes] = field(default_factory=list)

    @property
    def rows_per_shard(self) -> list[int]:
        return [sum(rows) for rows in zip(*(part.rows_per_shard for part in self.parts), strict=True)]

    @property
    def digests(self) -> list[int]:
        return [combine(*shard) for shard in zip(*(part.digests for part in self.parts), strict=True)]

    @property
    def staged(self) -> bool:
        return any(part.staged for part in self.parts)

    def chunks(self, shard: int) -> Iterator[pa.RecordBatch]:
        for part in self.parts:
            yield from part.chunks(shard)


BatchRecords = InlineRecords | StagedRecords | CombinedRecords


class StagingForecast:
    """Which parts of the next batch go to staging without first being collected: the parts whose
    last batch was staged and would not have fit in half the driver's result limit. A flood of
    large records then costs one failed collect (one batch computed twice), not one per batch;
    once a staged part would have fit with room to spare, the next one is collected again."""

    def __init__(self) -> None:
        self._parts: set[str] = set()

    def stage_first(self, part: str) -> bool:
        return part in self._parts

    def observe(self, part: str, records: InlineRecords | StagedRecords, limit_bytes: int) -> None:
        if isinstance(records, StagedRecords) and 2 * records.uncompressed_bytes > limit_bytes > 0:
            self._parts.add(part)
        else:
            self._parts.discard(part)


def total_rows(records: BatchRecords) -> int:
    return sum(records.rows_per_shard)


def split_by_shard(records: pa.Table, shards: int) -> list[pa.Table]:
    """Each shard's records, with every column they came with."""
    if shards == 1 or SHARD not in records.column_names:
        if shards != 1:
            raise ValueError(f"{shards} commit shards, but the records carry no {SHARD!r} column")
        return [records]
    shard_of = records.column(SHARD)
    return [records.filter(pc.equal(shard_of, shard)) for shard in range(shards)]


_MASK = (1 << 64) - 1


def digest(records: pa.Table | pa.RecordBatch) -> int:
    """An order-independent digest of records: the sum, modulo 2**64, of one hash per record.
    A re-run whose output differs in any record (or in how many) differs in it, whatever the
    order in which Spark hands the records over. From the executors' DIGEST column where the
    records carry it; otherwise hashed here (records built on the driver, e.g. in tests)."""
    if DIGEST in records.column_names:
        hashes = records.column(DIGEST).to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
        return int(hashes.sum(dtype=np.uint64))  # wraps modulo 2**64
    total = 0
    for topic, key, value in zip(*(records.column(name).to_pylist() for name in RECORDS_SCHEMA.names), strict=True):
        record = b"\0".join((str(topic).encode(), key or b"", value or b""))
        total += int.from_bytes(hashlib.blake2b(record, digest_size=8).digest(), "little")
    return total & _MASK


def combine(*digests: int) -> int:
    """The digest of records split in parts, from the parts' digests."""
    return sum(digests) & _MASK


def _as_records(table: pa.Table) -> pa.Table:
    return table.select(RECORDS_SCHEMA.names).cast(RECORDS_SCHEMA)


def staging_location(checkpoint: str, sink_id: str, batch_id: int, part: str) -> str:
    return f"{staging_root(checkpoint, sink_id)}/{batch_id}/{part}"


def staging_root(checkpoint: str, sink_id: str) -> str:
    return f"{checkpoint.rstrip('/')}/{sink_dir(sink_id)}/staging"


def forget_staged(checkpoint: str, sink_id: str, up_to: int) -> None:
    """Delete the staged batches up to `up_to` (published, or re-staged by a re-run)."""
    fs, root = filesystem(staging_root(checkpoint, sink_id))
    if not exists(fs, root):
        return
    for info in fs.get_file_info(pafs.FileSelector(root)):
        if info.type == pafs.FileType.Directory and info.base_name.isdigit() and int(info.base_name) <= up_to:
            fs.delete_dir(info.path)


def result_too_large(error: BaseException) -> bool:
    """Whether a Spark action failed because its results exceed spark.driver.maxResultSize."""
    java = getattr(error, "java_exception", None)
    while java is not None:
        if RESULT_TOO_LARGE in str(java.getMessage()):
            return True
        java = java.getCause()
    return RESULT_TOO_LARGE in str(error)


def _batches(fs: pafs.FileSystem, path: str, columns: list[str]) -> Iterator[pa.RecordBatch]:
    with fs.open_input_file(path) as source:
        yield from pq.ParquetFile(source).iter_batches(PRODUCE_CHUNK_ROWS, columns=columns)


def _parquet_files(fs: pafs.FileSystem, directory: str) -> list[str]:
    if not exists(fs, directory):
        return []  # a shard without records in this batch
    infos = fs.get_file_info(pafs.FileSelector(directory))
    return sorted(i.path for i in infos if i.type == pafs.FileType.File and i.base_name.endswith(".parquet"))
