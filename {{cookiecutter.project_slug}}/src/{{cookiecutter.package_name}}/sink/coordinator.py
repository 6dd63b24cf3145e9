"""Phase 2 (commit), on the driver: publish a batch whose records every task has computed.

The sink calls `commit_batch(records, N, pool)` only after batch N's execution succeeded, so the
state store versions of N and `offsets/N` exist: this is Flink's "checkpoint complete". From here
on batch N must become visible exactly once, whatever crashes.

    Step 1. Recovery, decided by recovery.decide (a pure function) from what the sink log,
            the batch markers (each shard's ShardRecovery, read when its producer started) and
            `offsets/N` say: if the sink log says N is committed, N was published before a
            crash: publish nothing. A shard whose batch marker is at N published N before a
            crash: it publishes nothing again. A marker past N (or at N from other source
            offsets) is an error, never a skip: Spark plans N+1 only after N's commit, so a
            marker ahead means this checkpoint is older than the output (CheckpointBehindOutput).
            So is a shard's marker that went back to a lower batch (MarkersWentBack).
            A re-run of N is compared with the first attempt's entry (rows and digest per
            shard), and the source offsets it records must not go back from the previous entry's.
    Step 2. Write the sink log entry for N, status `prepared`, before touching Kafka.
    Step 3. Per shard, one short Kafka transaction: the batch's records of that shard (counts
            and dead letters) and the batch marker.
    Step 4. Commit it: retry a commit that timed out, abort when the error requires it,
            fail the query when the producer is fenced or fatal. The shard's new state is a new
            ShardRecovery in the pool.
    Step 5. Mark the log entry `committed`. (Then Spark writes `commits/N`.)
    Step 6. Delete log entries older than LOG_ENTRIES_KEPT batches.

A new driver's `init_transactions` fences the old one and aborts its open transaction, so a
crash between steps 2 and 4 leaves nothing visible. Spark then runs batch N again from the same
offsets and state, which gives the same records (for a deterministic query: a re-run that does
not is reported), and the re-run publishes them once; a shard whose marker already has N (a
crash between two shards' commits) publishes nothing again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaError, KafkaException, Producer

from ..failures import JobFailure, Outcome, kafka_outcome
from ..observability import metrics
from ..observability.logs import event
from ..storage.checkpoint import SourceOffsets
from . import faults
from .batch_records import BatchRecords, InlineRecords, forget_staged, total_rows
from .marker import marker_key, marker_value
from .producers import CommitShard, ProducerPool, TransactionalIdRefused
from .recovery import Action, BatchFigures, Decision, MarkerFacts, ShardRecovery, decide
from .settings import COMMIT_ATTEMPTS_TIMEOUTS, Headers, SinkSettings
from .sink_log import COMMITTED, PREPARED, LogEntry, SinkLog

log = logging.getLogger(__name__)

LOG_ENTRIES_KEPT = 100
# A transaction the broker aborted for a transient reason is tried again in place this often.
ABORTED_TRANSACTION_RETRIES = 2


class ProducerFenced(JobFailure, RuntimeError):
    """Another driver took over this sink's transactional id: this one must stop."""

    outcome = Outcome.FENCED


class CommitFailed(JobFailure, RuntimeError):
    """The batch's transaction did not commit; Spark fails the batch and re-runs it."""

    outcome = Outcome.RETRY

    def __init__(self, message: str, outcome: Outcome = Outcome.RETRY) -> None:
        super().__init__(message)
        self.outcome = outcome  # type: ignore[misc]  # RIDE_OUT when Kafka's error says it is in the way


class KafkaFatal(JobFailure, RuntimeError):
    """The producer met a fatal error that is not a fence (its code is in the message): the
    producer is unusable and a restart would meet the same, so the job stops."""

    outcome = Outcome.HALT


class RecordRejected(JobFailure, RuntimeError):
    """The client refused a record (too large for the producer's limit): a re-run would meet the
    same record, so the job stops, naming the limit to raise."""

    outcome = Outcome.STOP
    option = "kafka.message.max.bytes"


class InvariantBroken(JobFailure, RuntimeError):
    """What the sink relies on does not hold; nothing of the batch was published, and no restart
    can help: the job stops for good, whatever the restart strategy."""

    outcome = Outcome.HALT


class CheckpointBehindOutput(InvariantBroken):
    """A shard's marker is past the batch: the checkpoint is older than the sink's output."""

    outcome = Outcome.STOP
    option = "checkpoint_location"


class SourceOffsetsWentBack(InvariantBroken):
    """The batch's source offsets are behind the previous batch's, or a partition disappeared."""

    outcome = Outcome.STOP
    option = "checkpoint_location"


class MarkersWentBack(InvariantBroken):
    """A shard's batch marker named a lower batch than an earlier marker of the shard had."""


@dataclass(frozen=True)
class Published:
    """What commit_batch did for a batch: its log entry (committed), the records it published per
    topic (none for a batch found published before a crash) and the seconds phase 2 took."""

    entry: LogEntry
    records_per_topic: dict[str, int]
    seconds: float


def commit_batch(settings: SinkSettings, records: BatchRecords | pa.Table, batch_id: int, pool: ProducerPool,
                 stopping: threading.Event | None = None) -> Published | None:
    """`records`: the batch inline or staged (batch_records.py); an Arrow table is taken inline.
    `pool`: the sink's producers. `stopping`: set when the job stops; a wait for another
    producer's transaction then gives up. None for a batch without records."""
    faults.maybe_crash(faults.BATCH_COMPUTED, batch_id)
    if isinstance(records, pa.Table):
        records = InlineRecords.of(records, settings.shards)
    if total_rows(records) == 0:
        return None  # an empty batch (e.g. a no-data batch that only advanced state): nothing to publish
    log_ = SinkLog(settings.checkpoint, settings.sink_id)
    started = time.monotonic()
    published: Counter[str] = Counter()
    try:
        shards = pool.shards_for(settings, stopping)

        # Step 1. Recovery: what the log, the markers and the checkpoint say; `decide` says what to do.
        figures = BatchFigures(tuple(records.rows_per_shard), tuple(f"{d:016x}" for d in records.digests),
                               SourceOffsets.of_batch(settings.checkpoint, batch_id))
        recovered = pool.recovered(settings)
        previous, before = log_.read(batch_id), log_.latest_before(batch_id)
        decision = decide(batch_id, figures, previous, before, recovered)
        check_markers_forward(settings, decision, recovered)
        check_markers_not_ahead(settings, batch_id, decision, recovered)
        if previous is not None:
            report_rerun_mismatch(settings, batch_id, previous, figures, decision)
            if decision.action is Action.ALREADY_COMMITTED:
                return Published(previous, {}, time.monotonic() - started)
        check_offsets_forward(batch_id, before, decision)
        entry = LogEntry(
            batch_id=batch_id,
            status=PREPARED,
            transactional_ids=[shard.transactional_id for shard in shards],
            records_per_shard=list(figures.rows_per_shard),
            digests_per_shard=list(figures.digests_per_shard),
            source_offsets=figures.source_offsets,
            records=total_rows(records),
            prepared_at=time.time(),
        )
        if decision.shards:
            # Step 2. The log entry, before Kafka is touched.
            log_.write(entry)
            faults.maybe_crash(faults.AFTER_LOG_ENTRY, batch_id)
            # Steps 3 and 4, per shard; each commit gives the shard's new state.
            offsets = figures.source_offsets.digest()
            for shard in shards:
                if shard.shard in decision.shards:
                    published += publish(settings, shard, records, batch_id, offsets)
                    pool.record(settings, ShardRecovery(shard.shard, shard.transactional_id, batch_id, offsets))
        # Step 5.
        entry = entry.committed(time.time())
        log_.write(entry)
        faults.maybe_crash(faults.AFTER_LOG_COMMITTED, batch_id)
    except Exception as error:
        pool.reset()  # its producers' state is unknown now
        metrics.COMMIT_FAILURES.labels(settings.sink_id).inc()
        if isinstance(error, ProducerFenced):
            metrics.FENCED.labels(settings.sink_id).inc()
        raise
    seconds = time.monotonic() - started
    metrics.record_batch(settings.sink_id, published, seconds)
    # Step 6.
    log_.forget_before(batch_id - LOG_ENTRIES_KEPT + 1)
    if records.staged:
        forget_staged(settings.checkpoint, settings.sink_id, batch_id)
    return Published(entry, dict(published), seconds)


def check_markers_forward(settings: SinkSettings, decision: Decision, recovered: list[ShardRecovery]) -> None:
    """Each shard's markers move forward only (recovery.markers_gone_back)."""
    if decision.action is Action.MARKERS_WENT_BACK:
        state = recovered[decision.shards[0]]
        raise markers_went_back(settings.sink_id, settings.marker_topic, state.shard, state)


def markers_went_back(sink_id: str, marker_topic: str, shard: int, marker: MarkerFacts) -> MarkersWentBack:
    """The refusal of markers that went back, for the coordinator and the start-up check."""
    return MarkersWentBack(
        f"sink {sink_id!r}: shard {shard}'s batch markers in {marker_topic!r} went back: one said batch "
        f"{marker.batch_id} was published, a later one batch {marker.went_back_to}. Only this sink's producers "
        "write its markers, in batch order, so another writer wrote these (another job with the same sink_id, or "
        "a tool), and which batches are published can no longer be told. Nothing was published. Stop any other "
        f"job with sink_id {sink_id!r}, then start afresh with a new sink_id and a new checkpoint_location, or "
        "from a savepoint.")


def check_markers_not_ahead(settings: SinkSettings, batch_id: int, decision: Decision,
                            recovered: list[ShardRecovery]) -> None:
    """A marker past batch N, or at N from other source offsets than this run's `offsets/N`
    (recovery.markers_ahead): the checkpoint is older than the output. Skipping N then would
    leave its counts in the state, never in the output."""
    if decision.action is not Action.CHECKPOINT_BEHIND_OUTPUT:
        return
    marker = recovered[decision.shards[0]]
    raise CheckpointBehindOutput(
        f"batch {batch_id} is planned by {settings.checkpoint}, but "
        f"sink {settings.sink_id!r} already published batch {marker.batch_id}"
        f"{' from other source offsets' if marker.batch_id == batch_id else ''} (shard {marker.shard}'s marker in "
        f"{settings.marker_topic!r}): the checkpoint is older than the output (restored from a copy, or a second "
        "checkpoint under the same sink_id). Nothing was published. Put back the checkpoint the job last ran "
        "with, or start afresh with a new sink_id and a new checkpoint_location.")


def report_rerun_mismatch(settings: SinkSettings, batch_id: int, first: LogEntry, rerun: BatchFigures,
                          decision: Decision) -> None:
    """A re-run whose figures differ from the first attempt's (decision.rerun_mismatch): a log
    line and eos_sink_rerun_mismatch_total. The shards whose marker says they published N hold
    the first attempt's records if it was only prepared, while the others publish the re-run's."""
    if not decision.rerun_mismatch:
        return
    differ, committed_shards = list(decision.rerun_mismatch), sorted(decision.published_before)
    metrics.RERUN_MISMATCH.labels(settings.sink_id).inc()
    mixed = first.status is PREPARED and bool(committed_shards)
    outcome = (f" Shards {committed_shards} had already published the first attempt's records, the others "
               "publish this one's: the batch's shards now come from two computations." if mixed else
               " Nothing of the re-run is published where the first attempt was." if first.status is COMMITTED
               else "")
    log.error("batch %d was computed again with other records than its first attempt in shards %s (rows %s, then %s):"
              " the query is not deterministic.%s", batch_id, differ, first.records_per_shard,
              list(rerun.rows_per_shard), outcome,
              extra=event("rerun_mismatch", batch_id=batch_id, shards=differ,
                          shards_published_before=committed_shards, two_computations=mixed))


def check_offsets_forward(batch_id: int, before: LogEntry | None, decision: Decision) -> None:
    """The source offsets batch N records are at or past those of the batch before it (`before`),
    in every partition: a partition that goes back or disappears would have its records counted
    twice, or be read from another topic's history (a topic deleted and created again)."""
    if decision.action is not Action.SOURCE_OFFSETS_WENT_BACK or before is None:
        return
    raise SourceOffsetsWentBack(
        f"batch {batch_id}: its source offsets go back from batch {before.batch_id}'s: "
        + "; ".join(decision.problems) + ". Was an input topic deleted and created again? Nothing was published; "
        "start on a new checkpoint_location (with starting_offsets where it should begin) and a new sink_id.")


def publish(settings: SinkSettings, shard: CommitShard, records: BatchRecords, batch_id: int,
            source_offsets: str = "") -> Counter[str]:
    """Steps 3 and 4 for one shard: one Kafka transaction with its records and its marker. A
    transaction that Kafka aborted for a transient reason is tried again in place. Returns the
    records published per topic. `source_offsets`: the digest of the batch's (SourceOffsets.digest)."""
    for attempt in range(ABORTED_TRANSACTION_RETRIES + 1):
        try:
            published = _transaction(settings, shard, records, batch_id, source_offsets)
            break
        except KafkaException as error:
            kafka_error = error.args[0]
            if kafka_error.txn_requires_abort() and not kafka_error.fatal():
                _abort(settings, shard)
                if attempt < ABORTED_TRANSACTION_RETRIES:  # aborted for a transient reason: again, in place
                    metrics.COMMIT_RETRIES.labels(settings.sink_id).inc()
                    continue
            raise failed_transaction(settings, shard, batch_id, kafka_error, attempt) from error
    metrics.LAST_COMMITTED_BATCH.labels(settings.sink_id, str(shard.shard)).set(batch_id)
    faults.maybe_crash(faults.AFTER_KAFKA_COMMIT, batch_id)
    return published


def _transaction(settings: SinkSettings, shard: CommitShard, records: BatchRecords, batch_id: int,
                 source_offsets: str) -> Counter[str]:
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
                 marker_value(settings.sink_id, shard.shard, batch_id, records.rows_per_shard[shard.shard],
                              source_offsets),
                 [("batch_id", str(batch_id).encode())])
    except RecordRejected:
        _abort(settings, shard)  # a failed abort must not hide the refusal
        raise
    producer.flush(settings.commit_timeout_seconds)  # on the broker, still invisible to read_committed
    faults.maybe_crash(faults.BEFORE_KAFKA_COMMIT, batch_id)
    # Step 4.
    _commit(settings, producer, max(1.0, deadline - time.monotonic()))
    return published


def _produce(producer: Producer, topic: str, key: bytes | None, value: bytes | None, headers: Headers) -> None:
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
    """Commit; a commit that timed out is retried (Kafka documents it as retriable), with a
    growing pause, within the budget that the transaction time-out leaves."""
    deadline = time.monotonic() + budget
    pause = COMMIT_RETRY_PAUSE_SECONDS
    while True:
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as error:
            if not error.args[0].retriable() or time.monotonic() + pause >= deadline:
                raise
            metrics.COMMIT_RETRIES.labels(settings.sink_id).inc()
            time.sleep(pause)
            pause = min(pause * 2, COMMIT_RETRY_MAX_PAUSE_SECONDS)


COMMIT_RETRY_PAUSE_SECONDS = 0.1
COMMIT_RETRY_MAX_PAUSE_SECONDS = 2.0


def _abort(settings: SinkSettings, shard: CommitShard) -> None:
    """Abort the shard's open transaction. One that cannot be aborted is left to the next
    producer's init_transactions (which aborts it) and logged: the caller's error is the cause."""
    try:
        shard.producer.abort_transaction(settings.commit_timeout_seconds)
    except KafkaException as error:
        log.warning("transactional id %s: the abort failed too (%s); the next start of the producer aborts "
                    "the transaction", shard.transactional_id, error.args[0].str())


def failed_transaction(settings: SinkSettings, shard: CommitShard, batch_id: int, error: KafkaError,
                       attempt: int) -> JobFailure:
    """A shard's transaction that failed, as the sink's own exception: its outcome is the one the
    error's code maps to (failures.kafka_outcome), its message names the transactional id."""
    outcome, _ = kafka_outcome(error)
    where = f"transactional id {shard.transactional_id}: {error.str()} ({error.name()})"
    if outcome is Outcome.FENCED:
        return ProducerFenced(f"{where}. Another job (or a newer instance of this one) uses the same sink id; "
                              "this one stops.")
    if error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return TransactionalIdRefused.of(settings)
    if outcome is Outcome.HALT:
        return KafkaFatal(f"{where}: the producer cannot go on; the job stops")
    retried = f", aborted {attempt + 1} times" if error.txn_requires_abort() else ""
    return CommitFailed(f"batch {batch_id}, shard {shard.shard}{retried}: {error.str()} ({error.name()})", outcome)

