"""Steps 3 and 4 in Spark tasks: task s of the publishing job publishes commit shard s's part of
the batch (distributed_records.py put it in partition s) in the shard's own transaction, and
returns what happened as a row, never as an exception: the driver reads every shard's outcome
(failures.Outcome) as a value and decides.

In the task, the shard's protocol is the driver's (shard_transaction.publish), preceded by what
a new producer must do before it may publish:
  1. init_transactions with the shard's transactional id: fences any earlier producer of the
     shard (an earlier attempt of the task, a speculative copy, a lost executor coming back, the
     driver) and aborts its open transaction;
  2. read the shard's marker, settled (an open transaction of another producer on the marker
     topic is waited out): at batch N from these source offsets, an earlier attempt published
     the shard, which publishes nothing again; past N (or at N from other offsets), refused;
  3. the transaction: records, figures checked against phase 1's, marker, commit.
Spark may run a task twice (a retry, speculation): the second attempt's step 1 fences the first,
and its step 2 sees what the first committed, so a shard is published once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaException
from pyspark.sql import SparkSession

from ..failures import JobFailure, Outcome, kafka_outcome
from . import faults
from .at_least_once import TaskFunction
from .marker import ForeignTransactionWait, MarkersUndecided, read_marker_values
from .producers import CommitShard, TransactionalIdRefused
from .settings import SinkSettings
from .shard_transaction import (
    Chunks,
    CommitFailed,
    KafkaFatal,
    ProducerFenced,
    RecomputedDifferently,
    RecordRejected,
    ShardFigures,
    publish,
)

log = logging.getLogger(__name__)

COMMITTED = "committed"  # the task committed the shard's transaction
PUBLISHED_BEFORE = "published before"  # the shard's marker already had the batch: nothing again
NOT_PENDING = "not pending"  # the driver found the shard published before the job started
AHEAD = "ahead"  # the shard's marker is past the batch, or at it from other source offsets
FAILED = "failed"

RESULT_SCHEMA = pa.schema([
    ("shard", pa.int32()), ("status", pa.string()), ("failure", pa.string()), ("outcome", pa.string()),
    ("message", pa.string()), ("published", pa.string()), ("marker_batch", pa.int64()), ("seconds", pa.float64()),
])
RESULT_DDL = ("shard INT, status STRING, failure STRING, outcome STRING, message STRING, published STRING, "
              "marker_batch BIGINT, seconds DOUBLE")


@dataclass(frozen=True)
class PublishOrder:
    """What the driver tells every task of the publishing job (pickled with the task function)."""

    settings: SinkSettings
    batch_id: int
    pending: frozenset[int]  # the shards to publish; the others answer NOT_PENDING
    figures: tuple[ShardFigures, ...]  # per shard, from phase 1
    source_offsets: str  # the digest of the batch's offsets/N (SourceOffsets.digest)
    faults: faults.DriverFaults  # the crash tests' faults, which kill the driver (faults.py)


@dataclass(frozen=True)
class ShardResult:
    """What a publishing task did with its shard."""

    shard: int
    status: str
    failure: str = ""  # the class of the failure (a JobFailure of the sink), if it failed
    outcome: str = ""  # its Outcome's value
    message: str = ""
    published: str = "{}"  # records per topic, as JSON
    marker_batch: int = -1  # for AHEAD: the batch the marker names
    seconds: float = 0.0

    def as_batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist([self.__dict__], schema=RESULT_SCHEMA)

    @classmethod
    def failed(cls, shard: int, failure: JobFailure, seconds: float) -> ShardResult:
        return cls(shard, FAILED, type(failure).__name__, failure.outcome.value, str(failure), seconds=seconds)


def publish_task(order: PublishOrder) -> TaskFunction:
    """The function mapInArrow runs in each task of the publishing job: one result row per task."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None, "a publishing task runs in a Spark task"
        yield publish_part(order, context.partitionId(), batches).as_batch()

    return run


def ready(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """What a warm-up task runs (`WorkerWarmUp`): nothing. Its worker unpickled it, so it has
    imported this module, the Kafka client and pyarrow, as a publishing task's worker must."""
    yield from batches


class WorkerWarmUp:
    """Starts Python workers for the publishing tasks while phase 1 runs. The first publishing
    job of a run otherwise pays a worker's start in its critical path (process, PySpark, pyarrow,
    this module and the client), a large share of phase 2 even for a batch of a million records
    on a small host (phase 2's time is in each batch's log line). Spark keeps an idle worker for
    a minute (PythonWorkerFactory), so the warm-up runs again only after that long without a
    publishing job. It is a small job of one task per shard,
    started just before phase 1's job: Spark's FIFO scheduler runs it first, a core per task. On a
    cluster it warms the executors its tasks land on, which may not be the publishing tasks'."""

    IDLE_SECONDS = 50.0  # below Spark's idle-worker time-out of 60 s

    def __init__(self) -> None:
        self._last_used: float | None = None

    def before_phase_1(self, spark: SparkSession, tasks: int) -> None:
        now = time.monotonic()
        if self._last_used is not None and now - self._last_used < self.IDLE_SECONDS:
            return
        self._last_used = now
        threading.Thread(target=_warm_up, args=(spark, tasks), name="publishing-workers-warm-up", daemon=True).start()

    def used(self) -> None:
        """A publishing job ran: its workers are warm for another minute."""
        self._last_used = time.monotonic()


def _warm_up(spark: SparkSession, tasks: int) -> None:
    try:
        spark.range(tasks, numPartitions=tasks).mapInArrow(ready, "id LONG").collect()
    except Exception as error:  # noqa: BLE001 - only a head start: the publishing job meets any real problem
        log.debug("the publishing workers' warm-up failed: %s", error)


def publish_part(order: PublishOrder, shard: int, batches: Iterator[pa.RecordBatch]) -> ShardResult:
    """Publish shard `shard`'s part of the batch (`batches`: its records, read once) as the task's
    steps 1 to 3 say, or tell why not."""
    started = time.monotonic()
    settings, batch_id = order.settings, order.batch_id
    if shard not in order.pending:
        return ShardResult(shard, NOT_PENDING)
    faults.in_task_of(order.faults)
    try:
        producer = CommitShard(settings, shard)  # step 1: fences every earlier producer of the shard
        try:
            # Step 2: the settled marker (init_transactions aborted what an earlier attempt left open).
            wait = ForeignTransactionWait(settings.sink_id, settings.foreign_transaction_tolerance_seconds)
            marker = read_marker_values(settings.bootstrap_servers, settings.marker_topic, settings.sink_id,
                                        settings.client, wait=wait).get(shard)
            if marker is not None and marker.batch_id >= batch_id:
                status = PUBLISHED_BEFORE if (marker.batch_id, marker.source_offsets) == (
                    batch_id, order.source_offsets) else AHEAD
                return ShardResult(shard, status, marker_batch=marker.batch_id, seconds=time.monotonic() - started)
            # Step 3.
            published = publish(settings, producer, _one_pass(batches, shard), batch_id, order.source_offsets,
                                expected=order.figures[shard], retries=0)
            return ShardResult(shard, COMMITTED, published=json.dumps(published),
                               seconds=time.monotonic() - started)
        finally:
            producer.producer.flush(0)
    except JobFailure as failure:
        return ShardResult.failed(shard, failure, time.monotonic() - started)
    except KafkaException as error:  # from init_transactions or the marker read
        kafka_error = error.args[0]
        outcome, _ = kafka_outcome(kafka_error)
        return ShardResult(shard, FAILED, CommitFailed.__name__, outcome.value,
                           f"shard {shard}: {kafka_error.str()} ({kafka_error.name()})",
                           seconds=time.monotonic() - started)


def _one_pass(batches: Iterator[pa.RecordBatch], shard: int) -> Chunks:
    """The task's records as shard_transaction's Chunks, which the task can read once only."""
    read = False

    def chunks() -> Iterator[pa.RecordBatch]:
        nonlocal read
        if read:
            raise RuntimeError("a publishing task's records can be read once")
        read = True
        for batch in batches:
            if batch.num_rows:
                shards = batch.column("commit_shard")
                if pc.min(shards).as_py() != shard or pc.max(shards).as_py() != shard:
                    raise RuntimeError(f"task {shard} of the publishing job was given another shard's records")
                yield batch

    return chunks


# The sink's failures a publishing task can report, by class name: the driver raises the same class.
_FAILURES: dict[str, type[JobFailure]] = {cls.__name__: cls for cls in (
    CommitFailed, KafkaFatal, ProducerFenced, RecomputedDifferently, RecordRejected, TransactionalIdRefused,
    MarkersUndecided)}


def as_failure(result: ShardResult) -> JobFailure:
    """A failed task's result as the sink's exception, with the outcome the task judged. A task
    fenced by another producer of its shard is not told apart from an earlier attempt of itself
    (a speculative copy), so it fails the batch (RETRY), it does not stop the job: a second job on
    this sink's ids is what the markers catch (they go ahead of the checkpoint, or back)."""
    outcome = Outcome(result.outcome)
    if outcome is Outcome.FENCED:  # by class (ProducerFenced) or by Kafka's code, wherever it was met
        return CommitFailed(f"shard {result.shard}'s publishing task was fenced: {result.message}")
    cls = _FAILURES.get(result.failure)
    if cls is None or cls is CommitFailed:
        return CommitFailed(result.message, outcome)
    failure = cls(result.message)
    return failure


def results_of(rows: list[dict[str, object]]) -> list[ShardResult]:
    return [ShardResult(**row) for row in rows]  # type: ignore[arg-type]
