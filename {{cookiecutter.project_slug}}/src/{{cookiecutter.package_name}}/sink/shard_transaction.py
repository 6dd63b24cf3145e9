"""Steps 3 and 4 of the protocol for one commit shard, wherever it runs (on the driver for a
small batch, in the shard's Spark task otherwise: coordinator.py): one Kafka transaction with the
shard's records of the batch and its batch marker, then its commit. And the sink's failures of a
transaction, each with the outcome the runner acts on (failures.Outcome)."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import repeat

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer

from ..failures import JobFailure, Outcome, kafka_outcome
from ..observability import metrics
from ..waiting import retry
from . import faults
from .batch_records import DIGEST, combine, digest, record_headers, stamped_values
from .marker import marker_key, marker_value
from .producers import CommitShard, TransactionalIdRefused
from .producing import RecordRejected, produce, produce_again
from .settings import COMMIT_ATTEMPTS_TIMEOUTS, SinkSettings

log = logging.getLogger(__name__)

# A transaction the broker aborted for a transient reason is tried again in place this often.
ABORTED_TRANSACTION_RETRIES = 2
COMMIT_RETRY_PAUSE_SECONDS = 0.1
COMMIT_RETRY_MAX_PAUSE_SECONDS = 2.0

# A shard's records of the batch, in chunks, from the start each time it is called.
Chunks = Callable[[], Iterator[pa.RecordBatch]]

# The loop every record takes calls the client's produce(topic, value, key, partition, callback,
# on_delivery, timestamp, headers) with its arguments by position: a keyword argument costs the
# client's argument parsing a lookup per call, a measurable part of a loop this short per record.
# The partitioner's choice, no callback (a failed delivery fails the commit), the current time.
ANY_PARTITION, NO_CALLBACK, NOW = -1, None, 0


class ProducerFenced(JobFailure, RuntimeError):
    """Another driver took over this sink's transactional id: this one must stop."""

    outcome = Outcome.TAKEN_OVER


class CommitFailed(JobFailure, RuntimeError):
    """The batch's transaction did not commit; Spark fails the batch and re-runs it."""

    outcome = Outcome.RETRY

    def __init__(self, message: str, outcome: Outcome = Outcome.RETRY) -> None:
        super().__init__(message)
        self.outcome = outcome  # type: ignore[misc]  # RIDE_OUT when Kafka's error says it is in the way


class KafkaFatal(JobFailure, RuntimeError):
    """The producer met a fatal error that is not a fence (its code is in the message): this
    producer cannot go on, a new one can. The batch fails and runs again with new producers, whose
    init_transactions aborts what this one left open (a broker that hung under a transaction can
    leave the producer so: INVALID_TXN_STATE on the abort). An error that comes back each time
    ends with the restart strategy."""

    outcome = Outcome.RETRY


class RecomputedDifferently(JobFailure, RuntimeError):
    """A publishing task's records differ from the figures the batch was prepared with: Spark
    computed part of the batch again (an executor lost its cached blocks) and the query gave other
    records. The transaction is aborted before its commit; the batch fails and runs again."""

    outcome = Outcome.RETRY


@dataclass(frozen=True)
class ShardFigures:
    """What a shard's part of the batch must be, from phase 1: checked before the commit."""

    rows: int
    digest: int


def run_shard_transaction(settings: SinkSettings, shard: CommitShard, chunks: Chunks, batch_id: int,
                          source_offsets: str = "", expected: ShardFigures | None = None,
                          retries: int = ABORTED_TRANSACTION_RETRIES) -> Counter[str]:
    """Steps 3 and 4 for one shard: one Kafka transaction with its records and its marker. A
    transaction that Kafka aborted for a transient reason is tried again in place, `retries`
    times. Returns the records published per topic. `source_offsets`: the digest of the batch's
    (SourceOffsets.digest). `expected`: the figures the records must have (checked before the
    marker is produced); None where they are the ones the figures were computed from."""
    for attempt in range(retries + 1):
        try:
            published = _transaction(settings, shard, chunks, batch_id, source_offsets, expected)
            break
        except KafkaException as error:
            kafka_error = fatal_cause(shard.producer, error.args[0])
            if kafka_error.txn_requires_abort() and not kafka_error.fatal():
                abort(settings, shard)
                if attempt < retries:  # aborted for a transient reason: again, in place
                    metrics.COMMIT_RETRIES.labels(settings.sink_id).inc()
                    continue
            raise failed_transaction(settings, shard.shard, batch_id, kafka_error, attempt) from error
    metrics.LAST_COMMITTED_BATCH.labels(settings.sink_id, str(shard.shard)).set(batch_id)
    faults.maybe_crash(faults.AFTER_KAFKA_COMMIT, batch_id)
    return published


def _transaction(settings: SinkSettings, shard: CommitShard, chunks: Chunks, batch_id: int, source_offsets: str,
                 expected: ShardFigures | None) -> Counter[str]:
    producer = shard.producer
    published: Counter[str] = Counter()
    deadline = time.monotonic() + settings.commit_timeout_seconds * COMMIT_ATTEMPTS_TIMEOUTS
    producer.begin_transaction()
    # Step 3. The records (answers and dead letters, each stamped with the batch id: in its value
    # and its header), then the marker.
    headers, published_id = settings.batch_header(batch_id), settings.output_batch_id(batch_id)
    rows, hashed = 0, 0
    try:
        # In chunks: a process holds Python objects for one chunk, not for the whole batch.
        for chunk in chunks():
            per_topic = pc.value_counts(chunk.column("topic")).to_pylist()
            for count in per_topic:
                published[count["values"]] += count["counts"]
            rows += chunk.num_rows
            if expected is not None and DIGEST in chunk.column_names:
                hashed = combine(hashed, digest(chunk))
            # One topic in the chunk (the usual case): one string for every record, not one string each.
            topics = (repeat(per_topic[0]["values"], chunk.num_rows) if len(per_topic) == 1
                      else chunk.column("topic").to_pylist())
            keys = chunk.column("key").to_pylist()
            values = stamped_values(chunk, published_id, settings.avro_topics, settings.protobuf_topics).to_pylist()
            send = producer.produce  # the bound method, looked up once per chunk
            if (own := record_headers(chunk, headers)) is None:
                for topic, key, value in zip(topics, keys, values, strict=True):
                    try:  # the loop every record takes: no call of ours around the client's
                        send(topic, value, key, ANY_PARTITION, NO_CALLBACK, NO_CALLBACK, NOW, headers)
                    except (BufferError, KafkaException) as error:
                        produce_again(producer, error, topic, key, value, headers)
            else:  # records with headers of their own (query.KEEPS_HEADERS)
                for topic, key, value, record_header in zip(topics, keys, values, own, strict=True):
                    try:
                        send(topic, value, key, ANY_PARTITION, NO_CALLBACK, NO_CALLBACK, NOW, record_header)
                    except (BufferError, KafkaException) as error:
                        produce_again(producer, error, topic, key, value, record_header)
        if expected is not None and (rows, hashed) != (expected.rows, expected.digest):
            raise RecomputedDifferently(
                f"batch {batch_id}, shard {shard.shard}: {rows} records (digest {hashed:016x}) where the batch was "
                f"prepared with {expected.rows} (digest {expected.digest:016x}): Spark computed part of the batch "
                "again and the query gave other records (it is not deterministic). Nothing of the shard was "
                "committed; the batch runs again.")
        # The marker speaks the checkpoint's own batch ids, in its value and its header.
        produce(producer, settings.marker_topic, marker_key(settings.sink_id, shard.shard),
                marker_value(settings.sink_id, shard.shard, batch_id, rows, source_offsets),
                [("batch_id", str(batch_id).encode())])
    except (RecordRejected, RecomputedDifferently):
        abort(settings, shard)  # a failed abort must not hide the refusal
        raise
    producer.flush(settings.commit_timeout_seconds)  # on the broker, still invisible to read_committed
    faults.maybe_crash(faults.BEFORE_KAFKA_COMMIT, batch_id)
    # Step 4.
    _commit(settings, producer, max(1.0, deadline - time.monotonic()))
    return published


def _commit(settings: SinkSettings, producer: Producer, budget: float) -> None:
    """Commit; a commit that timed out is retried (Kafka documents it as retriable), with a
    growing pause, within the budget that the transaction time-out leaves."""
    deadline = time.monotonic() + budget

    def retriable(error: Exception) -> bool:
        return isinstance(error, KafkaException) and error.args[0].retriable()

    retry(lambda: producer.commit_transaction(max(1.0, deadline - time.monotonic())), retriable, budget,
          COMMIT_RETRY_PAUSE_SECONDS, COMMIT_RETRY_MAX_PAUSE_SECONDS,
          retrying=metrics.COMMIT_RETRIES.labels(settings.sink_id).inc)


def fatal_cause(producer: Producer, error: KafkaError) -> KafkaError:
    """The error a call failed with; for `_FATAL` ("the producer met a fatal error earlier", which
    a produce call returns once the client's background thread has seen, say, a fence), the
    fatal error itself, which the transactional API reports: a fenced producer must be judged
    fenced, never retried (its restart would fence the newer instance back)."""
    if error.code() != KafkaError._FATAL:
        return error
    try:
        producer.abort_transaction(1.0)
    except KafkaException as fatal:
        cause: KafkaError = fatal.args[0]
        return cause
    return error


def abort(settings: SinkSettings, shard: CommitShard) -> None:
    """Abort the shard's open transaction. One that cannot be aborted is left to the next
    producer's init_transactions (which aborts it) and logged: the caller's error is the cause."""
    try:
        shard.producer.abort_transaction(settings.commit_timeout_seconds)
    except KafkaException as error:
        log.warning("transactional id %s: the abort failed too (%s); the next start of the producer aborts "
                    "the transaction", shard.transactional_id, error.args[0].str())


def failed_transaction(settings: SinkSettings, shard: int, batch_id: int, error: KafkaError,
                       attempt: int = 0) -> JobFailure:
    """A shard's Kafka error (its transaction's, or its producer's start), as the sink's own
    exception: its outcome is the one the error's code maps to (failures.kafka_outcome), its
    message names the transactional id. A fence is ProducerFenced wherever it is met."""
    outcome, _ = kafka_outcome(error)
    where = f"transactional id {settings.transactional_id(shard)}: {error.str()} ({error.name()})"
    if outcome is Outcome.TAKEN_OVER:
        return ProducerFenced(f"{where}. Another job (or a newer instance of this one) uses the same sink id; "
                              "this one stops.")
    if error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return TransactionalIdRefused.of(settings)
    if error.fatal():
        return KafkaFatal(f"{where}: the producer cannot go on; the batch runs again with new producers")
    retried = f", aborted {attempt + 1} times" if error.txn_requires_abort() else ""
    return CommitFailed(f"batch {batch_id}, shard {shard}{retried}: {error.str()} ({error.name()})", outcome)
