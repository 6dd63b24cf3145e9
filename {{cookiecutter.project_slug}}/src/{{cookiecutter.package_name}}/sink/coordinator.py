"""Phase 2 (commit), on the driver: publish a batch whose records every task has computed.

The sink calls `commit_batch(records, N)` only after batch N's execution succeeded, so the
state store versions of N and `offsets/N` exist: this is Flink's "checkpoint complete". From here
on batch N must become visible exactly once, whatever crashes.

    Step 1. Recovery: if the sink log says N is committed, or every shard's batch marker
            is at N or later, N was published before a crash: publish nothing.
    Step 2. Write the sink log entry for N, status `prepared`, before touching Kafka.
    Step 3. Per shard, one short Kafka transaction: the batch's records of that shard (counts
            and dead letters) and the batch marker.
    Step 4. Commit it: retry a commit that timed out, abort when the error requires it,
            fail the query when the producer is fenced or fatal.
    Step 5. Mark the log entry `committed`. (Then Spark writes `commits/N`.)
    Step 6. Delete log entries older than LOG_ENTRIES_KEPT batches.

A new driver's `init_transactions` fences the old one and aborts its open transaction, so a
crash between steps 2 and 4 leaves nothing visible. Spark then runs batch N again from the same
offsets and state, which gives the same records, and the re-run publishes them once; a shard
whose marker already has N (a crash between two shards' commits) publishes nothing again.
"""

from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer

from .. import metrics
from ..checkpoint import batch_offsets
from . import faults, producers
from .batch_records import BatchRecords, InlineRecords, forget_staged, total_rows
from .marker import marker_key, marker_value
from .producers import CommitShard
from .settings import COMMIT_ATTEMPTS_TIMEOUTS, SinkSettings
from .sink_log import COMMITTED, PREPARED, LogEntry, SinkLog

LOG_ENTRIES_KEPT = 100
# A transaction the broker aborted for a transient reason is tried again in place this often.
ABORTED_TRANSACTION_RETRIES = 2


class ProducerFenced(RuntimeError):
    """Another driver took over this sink's transactional id: this one must stop."""


class CommitFailed(RuntimeError):
    """The batch's transaction did not commit; Spark fails the batch and re-runs it."""


class RecordRejected(CommitFailed):
    """The client refused a record (too large for the producer's limit): a re-run cannot help."""


def commit_batch(settings: SinkSettings, records: BatchRecords | pa.Table, batch_id: int) -> LogEntry | None:
    """`records`: the batch inline or staged (batch_records.py); an Arrow table is taken inline."""
    faults.maybe_crash(faults.BATCH_COMPUTED, batch_id)
    if isinstance(records, pa.Table):
        records = InlineRecords.of(records, settings.shards)
    if total_rows(records) == 0:
        return None  # an empty batch (e.g. a no-data batch that only advanced state): nothing to publish
    log = SinkLog(settings.checkpoint, settings.sink_id)
    started = time.monotonic()
    published: Counter[str] = Counter()
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
            records_per_shard=records.rows_per_shard,
            source_offsets={"sources": batch_offsets(settings.checkpoint, batch_id)},
            records=total_rows(records),
            prepared_at=time.time(),
        )
        if pending:
            # Step 2. The log entry, before Kafka is touched.
            log.write(entry)
            faults.maybe_crash(faults.AFTER_LOG_ENTRY, batch_id)
            # Steps 3 and 4, per shard.
            for shard in pending:
                published += publish(settings, shard, records, batch_id)
        # Step 5.
        entry.status = COMMITTED
        entry.committed_at = time.time()
        log.write(entry)
        faults.maybe_crash(faults.AFTER_LOG_COMMITTED, batch_id)
    except Exception as error:
        producers.reset(settings)  # its producers' state is unknown now
        metrics.COMMIT_FAILURES.labels(settings.sink_id).inc()
        if isinstance(error, ProducerFenced):
            metrics.FENCED.labels(settings.sink_id).inc()
        raise
    metrics.record_batch(settings.sink_id, batch_id, published, time.monotonic() - started)
    # Step 6.
    log.forget_before(batch_id - LOG_ENTRIES_KEPT + 1)
    if records.staged:
        forget_staged(settings.checkpoint, settings.sink_id, batch_id)
    return entry


def publish(settings: SinkSettings, shard: CommitShard, records: BatchRecords, batch_id: int) -> Counter[str]:
    """Steps 3 and 4 for one shard: one Kafka transaction with its records and its marker. A
    transaction that Kafka aborted for a transient reason is tried again in place. Returns the
    records published per topic."""
    for attempt in range(ABORTED_TRANSACTION_RETRIES + 1):
        try:
            published = _transaction(settings, shard, records, batch_id)
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
            metrics.COMMIT_RETRIES.labels(settings.sink_id).inc()
    shard.published = batch_id
    metrics.LAST_COMMITTED_BATCH.labels(settings.sink_id, str(shard.shard)).set(batch_id)
    faults.maybe_crash(faults.AFTER_KAFKA_COMMIT, batch_id)
    return published


def _transaction(settings: SinkSettings, shard: CommitShard, records: BatchRecords, batch_id: int
                 ) -> Counter[str]:
    producer = shard.producer
    published: Counter[str] = Counter()
    deadline = time.monotonic() + settings.commit_timeout_seconds * COMMIT_ATTEMPTS_TIMEOUTS
    producer.begin_transaction()
    # Step 3. The records (counts and dead letters), then the marker.
    headers = settings.batch_header(batch_id)
    try:
        # In chunks: the driver holds Python objects for one chunk, not for the whole batch.
        for chunk in records.chunks(shard.shard):
            for count in pc.value_counts(chunk.column("topic")).to_pylist():
                published[count["values"]] += count["counts"]
            topics, keys, values = (chunk.column(name).to_pylist() for name in ("topic", "key", "value"))
            for topic, key, value in zip(topics, keys, values, strict=True):
                _produce(producer, topic, key, value, headers)
        # The marker speaks the checkpoint's own batch ids, in its value and its header.
        _produce(producer, settings.marker_topic, marker_key(settings.sink_id, shard.shard),
                 marker_value(settings.sink_id, shard.shard, batch_id, records.rows_per_shard[shard.shard]),
                 [("batch_id", str(batch_id).encode())])
    except RecordRejected:
        producer.abort_transaction(settings.commit_timeout_seconds)
        raise
    producer.flush(settings.commit_timeout_seconds)  # on the broker, still invisible to read_committed
    faults.maybe_crash(faults.BEFORE_KAFKA_COMMIT, batch_id)
    # Step 4.
    _commit(settings, producer, max(1.0, deadline - time.monotonic()))
    return published


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


def _commit(settings: SinkSettings, producer: Producer, budget: float) -> None:
    """Commit; a commit that timed out is retried (Kafka documents it as retriable), within the
    budget that the transaction time-out leaves."""
    deadline = time.monotonic() + budget
    while True:
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as error:
            if error.args[0].retriable() and time.monotonic() < deadline:
                metrics.COMMIT_RETRIES.labels(settings.sink_id).inc()
                continue
            raise

