"""Phase 2 (commit), on the driver: publish a batch that every sink task has staged.

The sink calls `commit_batch(messages, N)` only after every task of batch N staged its part,
so the state store versions of N and `offsets/N` exist: this is Flink's "checkpoint complete". From here
on batch N must become visible exactly once, whatever crashes.

    Step 1. Recovery: if the sink log says N is committed, or every shard's batch marker
            is at N or later, N was published before a crash: publish nothing.
    Step 2. Write the sink log entry for N, status `prepared`, before touching Kafka.
    Step 3. Per shard, one short Kafka transaction: the staged records, the dead letters
            (staged with them), and the batch marker.
    Step 4. Commit it: retry a commit that timed out, abort when the error requires it,
            fail the query when the producer is fenced or fatal.
    Step 5. Mark the log entry `committed`. (Then Spark writes `commits/N`.)
    Step 6. Delete staged files older than the retention.

A new driver's `init_transactions` fences the old one and aborts its open transaction, so a
crash between steps 2 and 4 leaves nothing visible and Spark's re-run publishes once.
"""

from __future__ import annotations

import time

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer

from ..checkpoint import batch_offsets
from ..storage import filesystem, list_names
from . import faults, producers
from .marker import marker_key, marker_value
from .producers import CommitShard
from .settings import COMMIT_ATTEMPTS_TIMEOUTS, SinkSettings
from .sink_log import COMMITTED, PREPARED, LogEntry, SinkLog
from .stage import StagedFile, read_staged, sink_dir, staging_dir

LOG_ENTRIES_KEPT = 100
PRODUCE_CHUNK_ROWS = 65_536
# A transaction the broker aborted for a transient reason is tried again in place this often.
ABORTED_TRANSACTION_RETRIES = 2


class ProducerFenced(RuntimeError):
    """Another driver took over this sink's transactional id: this one must stop."""


class CommitFailed(RuntimeError):
    """The batch's transaction did not commit; Spark fails the batch and re-runs it."""


class RecordRejected(CommitFailed):
    """The client refused a record (too large for the producer's limit): a re-run cannot help."""


def commit_batch(settings: SinkSettings, messages: list[StagedFile | None], batch_id: int) -> LogEntry | None:
    faults.maybe_crash(faults.AFTER_STAGING, batch_id)
    log = SinkLog(settings.checkpoint, settings.sink_id)
    staged = sorted((m for m in messages if m is not None and m.rows > 0), key=lambda m: m.path)
    if not staged:
        return None  # an empty batch (e.g. a no-data batch that only advanced state): nothing to publish
    try:
        shards = producers.shards_for(settings)

        # Step 1. Recovery: already published before a crash?
        previous = log.read(batch_id)
        if previous is not None and previous.status == COMMITTED:
            return previous
        pending = [shard for shard in shards if shard.published < batch_id]
        entry = LogEntry(
            batch_id=batch_id,
            status=PREPARED,
            transactional_ids=[shard.transactional_id for shard in shards],
            staged=staged,
            source_offsets={"sources": batch_offsets(settings.checkpoint, batch_id)},
            records=sum(m.rows for m in staged),
        )
        if pending:
            # Step 2. The log entry, before Kafka is touched.
            log.write(entry)
            faults.maybe_crash(faults.AFTER_LOG_ENTRY, batch_id)
            # Steps 3 and 4, per shard.
            for shard in pending:
                publish(settings, shard, [m for m in staged if _shard_of(m, settings.shards) == shard.shard], batch_id)
        # Step 5.
        entry.status = COMMITTED
        entry.committed_at = time.time()
        log.write(entry)
        faults.maybe_crash(faults.AFTER_LOG_COMMITTED, batch_id)
    except Exception:
        producers.reset(settings)  # its producers' state is unknown now
        raise
    # Step 6.
    _clean(settings, log, batch_id)
    return entry


def _shard_of(staged: StagedFile, shards: int) -> int:
    """Staged files go to shards by the task's partition id, which a re-run of the batch keeps."""
    partition = int(staged.path.rsplit("/", 1)[1].split("-", 1)[0])
    return partition % shards


def publish(settings: SinkSettings, shard: CommitShard, staged: list[StagedFile], batch_id: int) -> None:
    """Steps 3 and 4 for one shard: one Kafka transaction with its records and its marker.
    The staged files are read first, so storage latency never counts against the transaction's
    time-out. A transaction that Kafka aborted for a transient reason is tried again in place."""
    tables = [read_staged(settings.checkpoint, message) for message in staged]
    for attempt in range(ABORTED_TRANSACTION_RETRIES + 1):
        try:
            _transaction(settings, shard, tables, batch_id)
            break
        except KafkaException as error:
            kafka_error = error.args[0]
            if kafka_error.fatal():
                raise ProducerFenced(
                    f"transactional id {shard.transactional_id}: {kafka_error.str()}. Another job (or a newer "
                    "instance of this one) uses the same sink id; this one stops."
                ) from error
            if not kafka_error.txn_requires_abort():
                raise CommitFailed(f"batch {batch_id}, shard {shard.shard}: {kafka_error.str()}") from error
            shard.producer.abort_transaction(settings.commit_timeout_seconds)
            if attempt == ABORTED_TRANSACTION_RETRIES:
                raise CommitFailed(f"batch {batch_id}, shard {shard.shard}: aborted {attempt + 1} times, last: "
                                   f"{kafka_error.str()}") from error
    shard.published = batch_id
    faults.maybe_crash(faults.AFTER_KAFKA_COMMIT, batch_id)


def _transaction(settings: SinkSettings, shard: CommitShard, tables: list[pa.Table], batch_id: int) -> None:
    producer = shard.producer
    deadline = time.monotonic() + settings.commit_timeout_seconds * COMMIT_ATTEMPTS_TIMEOUTS
    producer.begin_transaction()
    # Step 3. The staged records (counts and dead letters), then the marker.
    headers = [("batch_id", str(batch_id).encode())]
    records = 0
    try:
        for table in tables:
            # In chunks: the driver holds Python objects for one chunk, not for the whole batch.
            for chunk in table.to_batches(max_chunksize=PRODUCE_CHUNK_ROWS):
                topics, keys, values = (chunk.column(name).to_pylist() for name in ("topic", "key", "value"))
                for topic, key, value in zip(topics, keys, values, strict=True):
                    _produce(producer, topic, key, value, headers)
            records += table.num_rows
        _produce(producer, settings.marker_topic, marker_key(settings.sink_id, shard.shard),
                 marker_value(settings.sink_id, shard.shard, batch_id, records), headers)
    except RecordRejected:
        producer.abort_transaction(settings.commit_timeout_seconds)
        raise
    producer.flush(settings.commit_timeout_seconds)  # on the broker, still invisible to read_committed
    faults.maybe_crash(faults.BEFORE_KAFKA_COMMIT, batch_id)
    # Step 4.
    _commit(producer, max(1.0, deadline - time.monotonic()))


def _produce(producer: Producer, topic: str, key: bytes | None, value: bytes | None, headers: list) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, headers=headers)
            return
        except BufferError:  # the local queue is full: let librdkafka send some first
            producer.poll(0.05)
        except KafkaException as error:  # refused by the client itself, e.g. larger than message.max.bytes
            if error.args[0].code() not in _TOO_LARGE:
                raise
            size = len(value or b"") + len(key or b"")
            raise RecordRejected(
                f"a record for {topic!r} (key {bytes(key or b'')[:60]!r}, {size} bytes of key and value) was "
                f"refused: {error.args[0].str()}. The producer's limit is message.max.bytes (librdkafka "
                "default 1,000,000; set it in [kafka], below the broker's and topic's max.message.bytes)."
            ) from error


_TOO_LARGE = (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE)


def _commit(producer: Producer, budget: float) -> None:
    """Commit; a commit that timed out is retried (Kafka documents it as retriable), within the
    budget that the transaction time-out leaves."""
    deadline = time.monotonic() + budget
    while True:
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as error:
            if error.args[0].retriable() and time.monotonic() < deadline:
                continue
            raise


def _clean(settings: SinkSettings, log: SinkLog, batch_id: int) -> None:
    """Keep the staged files of the last few batches (for debugging) and the last log entries."""
    fs, base = filesystem(settings.checkpoint)
    for name in list_names(fs, f"{base}/{sink_dir(settings.sink_id)}/staging"):
        if name.isdigit() and int(name) <= batch_id - settings.staging_retention_batches:
            fs.delete_dir(f"{base}/{staging_dir(settings.sink_id, int(name))}")
    for old in log.batch_ids():
        if old <= batch_id - LOG_ENTRIES_KEPT:
            fs.delete_file(f"{log.directory}/{old}.json")
