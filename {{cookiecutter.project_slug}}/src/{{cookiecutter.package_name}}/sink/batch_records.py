"""A batch's Kafka records on the driver, per commit shard, in chunks: what phase 2 publishes
when the driver publishes the batch (placement.Placement; distributed_records.py holds a batch
that Spark tasks publish). Spark hands the batch to the driver as Arrow (`toArrow`), within
`spark.driver.maxResultSize` (Spark's default 1g); a batch past that is published by tasks.

The driver holds one chunk of Python objects at a time while it produces.

Each shard's records come with an order-independent digest (a sum of per-record hashes), so that
a re-run of the batch can be compared with its first attempt (coordinator.py).

Records without a topic are *read-back requests*: not published, but their keys handed to the job, which turns them
into more records of the same batch (its dead letters, read back; dead_letter_readback.py)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .settings import Headers

# The records' schema: what the sink is given and produces as it is.
RECORDS_SCHEMA = pa.schema([("topic", pa.string()), ("key", pa.binary()), ("value", pa.binary())])
# Where the query keeps its input's headers (query.KEEPS_HEADERS), each record's own, as Spark's
# Kafka sink names them: a list of (key, value) structs, null for none. The sink adds `batch_id` last.
HEADERS = "headers"
# With several commit shards, each record's shard (kafka_sink.for_commit); without, shard 0.
SHARD = "commit_shard"
# Each record's 64-bit hash over topic, key, value (without the batch id) and headers, computed by
# the executors in the streaming query (kafka_sink.for_commit).
DIGEST = "record_digest"
PRODUCE_CHUNK_ROWS = 65_536
# Spark's message when a job's results exceed spark.driver.maxResultSize (TaskSetManager).
RESULT_TOO_LARGE = "is bigger than spark.driver.maxResultSize"


@dataclass(frozen=True)
class InlineRecords:
    """The batch on the driver, split by shard."""

    parts: list[pa.Table]
    read_back_keys: list[bytes] = field(default_factory=list)
    digests: list[int] = field(default_factory=list)  # per shard

    @classmethod
    def of(cls, table: pa.Table, shards: int) -> InlineRecords:
        topic = table.column("topic")
        read_back_keys = [] if topic.null_count == 0 else table.filter(pc.is_null(topic)).column("key").to_pylist()
        published = table if topic.null_count == 0 else table.filter(pc.is_valid(topic))
        parts = split_by_shard(published, shards)
        return cls([_as_records(part) for part in parts], read_back_keys, [digest(part) for part in parts])

    @property
    def rows_per_shard(self) -> list[int]:
        return [part.num_rows for part in self.parts]

    @property
    def size_bytes(self) -> int:
        return sum(part.nbytes for part in self.parts)

    def chunks(self, shard: int) -> Iterator[pa.RecordBatch]:
        yield from self.parts[shard].to_batches(max_chunksize=PRODUCE_CHUNK_ROWS)


@dataclass(frozen=True)
class CombinedRecords:
    """A batch's records from several parts: its output, then the records its read-back requests named."""

    parts: list[InlineRecords]
    read_back_keys: list[bytes] = field(default_factory=list)

    @property
    def rows_per_shard(self) -> list[int]:
        return [sum(rows) for rows in zip(*(part.rows_per_shard for part in self.parts), strict=True)]

    @property
    def digests(self) -> list[int]:
        return [combine(*shard) for shard in zip(*(part.digests for part in self.parts), strict=True)]

    @property
    def size_bytes(self) -> int:
        return sum(part.size_bytes for part in self.parts)

    def chunks(self, shard: int) -> Iterator[pa.RecordBatch]:
        for part in self.parts:
            yield from part.chunks(shard)


BatchRecords = InlineRecords | CombinedRecords


def chunks_of(records: BatchRecords, shard: int) -> Callable[[], Iterator[pa.RecordBatch]]:
    """Shard `shard`'s records, for shard_transaction.run_shard_transaction, which may read them more than once."""
    return lambda: records.chunks(shard)


def split_by_shard(records: pa.Table, shards: int) -> list[pa.Table]:
    """Each shard's records, with every column they came with."""
    if shards == 1 or SHARD not in records.column_names:
        if shards != 1:
            raise ValueError(f"{shards} commit shards, but the records carry no {SHARD!r} column")
        return [records]
    shard_of = records.column(SHARD)
    return [records.filter(pc.equal(shard_of, shard)) for shard in range(shards)]


UINT64_MASK = (1 << 64) - 1  # 64 bits: a digest (a sum modulo 2**64), a zig-zag long


def digest(records: pa.Table | pa.RecordBatch) -> int:
    """An order-independent digest of records: the sum, modulo 2**64, of one hash per record.
    A re-run whose output differs in any record (or in how many) differs in it, whatever the
    order in which Spark hands the records over. From the executors' DIGEST column where the
    records carry it; otherwise hashed here (records built on the driver, e.g. in tests)."""
    if DIGEST in records.column_names:
        hashes = records.column(DIGEST).to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
        return int(hashes.sum(dtype=np.uint64))  # wraps modulo 2**64
    total = 0
    columns = [records.column(name).to_pylist() for name in RECORDS_SCHEMA.names]
    own = records.column(HEADERS).to_pylist() if HEADERS in records.column_names else [None] * records.num_rows
    for topic, key, value, headers in zip(*columns, own, strict=True):
        record = b"\0".join((str(topic).encode(), key or b"", value or b"", repr(headers or []).encode()))
        total += int.from_bytes(hashlib.blake2b(record, digest_size=8).digest(), "little")
    return total & UINT64_MASK


def record_headers(chunk: pa.RecordBatch, sink_headers: Headers) -> list[Headers] | None:
    """Each record's headers as the producer takes them: its own (HEADERS), then the sink's
    (`sink_headers`, the batch id). None where no record of the chunk has headers of its own: each
    then takes `sink_headers` as they are, and the chunk costs no conversion."""
    if HEADERS not in chunk.column_names or not pc.sum(pc.list_value_length(chunk.column(HEADERS))).as_py():
        return None
    return [[(header["key"], header["value"]) for header in own] + sink_headers if own else sink_headers
            for own in chunk.column(HEADERS).to_pylist()]


def with_batch_id(values: pa.Array | pa.ChunkedArray, batch_id: int) -> pa.Array | pa.ChunkedArray:
    """Values as they are published: each JSON object (the query's answers and its dead letters,
    output_records.encode) with `"batch_id": N` as its last field, N the batch's published id
    (SinkSettings.output_batch_id); a null value stays null. Stamped as the records are produced,
    as their `batch_id` header is, so that a batch's plan holds nothing of its id (kafka_sink.py)."""
    closing = pa.scalar(f',"batch_id":{int(batch_id)}}}'.encode(), pa.binary())
    return pc.binary_join_element_wise(pc.binary_slice(values, 0, -1), closing, pa.scalar(b"", pa.binary()))


def with_avro_batch_id(values: pa.Array | pa.ChunkedArray, batch_id: int) -> pa.Array | pa.ChunkedArray:
    """Avro values as they are published: each record (an answer without its last field,
    formats/avro_output.py) with the batch id appended as an Avro long, which is its last field,
    `batch_id`; a null value stays null."""
    closing = pa.scalar(avro_long(int(batch_id)), pa.binary())
    return pc.binary_join_element_wise(values, closing, pa.scalar(b"", pa.binary()))


def with_protobuf_batch_id(values: pa.Array | pa.ChunkedArray, batch_id: int, number: int
                           ) -> pa.Array | pa.ChunkedArray:
    """Protobuf values as they are published: each message (an answer without `batch_id`,
    formats/protobuf_output.py) with the field `batch_id` (an int64 numbered `number`) appended:
    a message's fields may come in any order, so the appended tag and varint are that field."""
    closing = pa.scalar(varint(number << 3) + varint(int(batch_id) & UINT64_MASK), pa.binary())
    return pc.binary_join_element_wise(values, closing, pa.scalar(b"", pa.binary()))


def stamped_values(chunk: pa.RecordBatch, batch_id: int, avro_topics: frozenset[str],
                   protobuf_topics: Mapping[str, int] | None = None) -> pa.Array | pa.ChunkedArray:
    """A chunk's values with the batch id: the records of `avro_topics` as Avro (with_avro_batch_id),
    those of `protobuf_topics` (topic: `batch_id`'s field number) as Protobuf
    (with_protobuf_batch_id), the others as JSON (with_batch_id)."""
    values = chunk.column("value")
    stampers = {topic: functools.partial(with_avro_batch_id, values, batch_id) for topic in avro_topics}
    stampers.update({topic: functools.partial(with_protobuf_batch_id, values, batch_id, number)
                     for topic, number in (protobuf_topics or {}).items()})
    if not stampers:
        return with_batch_id(values, batch_id)
    stamped = None
    for topic, stamp in sorted(stampers.items()):
        of_topic = pc.fill_null(pc.equal(chunk.column("topic"), pa.scalar(topic, pa.string())), False)
        if pc.all(of_topic).as_py():
            return stamp()
        if pc.any(of_topic).as_py():
            stamped = pc.if_else(of_topic, stamp(), with_batch_id(values, batch_id) if stamped is None else stamped)
    return with_batch_id(values, batch_id) if stamped is None else stamped


def varint(value: int) -> bytes:
    """Protobuf's varint of a non-negative number below 2**64: 7-bit groups, lowest first."""
    encoded = bytearray()
    while value > 0x7F:
        encoded.append((value & 0x7F) | 0x80)
        value >>= 7
    encoded.append(value)
    return bytes(encoded)


def avro_long(value: int) -> bytes:
    """Avro's binary encoding of a long: zig-zag, then the same varint as Protobuf's."""
    return varint(((value << 1) ^ (value >> 63)) & UINT64_MASK)


def combine(*digests: int) -> int:
    """The digest of records split in parts, from the parts' digests."""
    return sum(digests) & UINT64_MASK


def _as_records(table: pa.Table) -> pa.Table:
    records = table.select(RECORDS_SCHEMA.names).cast(RECORDS_SCHEMA)
    return records.append_column(HEADERS, table.column(HEADERS)) if HEADERS in table.column_names else records


def result_too_large(error: BaseException) -> bool:
    """Whether a Spark action failed because its results exceed spark.driver.maxResultSize."""
    java = getattr(error, "java_exception", None)
    while java is not None:
        if RESULT_TOO_LARGE in str(java.getMessage()):
            return True
        java = java.getCause()
    return RESULT_TOO_LARGE in str(error)
