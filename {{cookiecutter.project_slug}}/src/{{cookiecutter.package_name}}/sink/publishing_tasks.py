"""Phase 2's steps 3 and 4 in Spark tasks: task s of the publishing job publishes commit shard s's
part of the batch (distributed_records.py put it in partition s) in the shard's own transaction,
and returns what happened as a row: its outcome as a value (the shard's published records, or the
sink's failure itself, pickled), never as an exception, so that the driver reads every shard's
outcome and raises the gravest, as it would have met it.

A task starts its shard as the driver's pool does (producers.start_shards): init_transactions
with the shard's transactional id fences any earlier producer of the shard (an earlier attempt
of the task, a lost executor coming back, the driver) and aborts its open transaction; then the
shard's marker, settled, gives the batch's fate in the shard (recovery.fate): published before,
nothing again; ahead, refused; else the shard's transaction (shard_transaction.run_shard_transaction), the
driver's own. Spark may run a task again (a retry): the new attempt fences the earlier one, and
sees what it committed, so a shard is published once. Speculative copies, which would fence the
task they copy, are off (spark/session.py).
"""

from __future__ import annotations

import json
import logging
import pickle
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaException
from pyspark.sql import SparkSession

from ..failures import JobFailure
from . import faults
from .at_least_once import TaskFunction
from .invariants import checkpoint_behind_output
from .producers import start_shards
from .recovery import Fate, fate
from .settings import SinkSettings
from .shard_transaction import Chunks, ShardFigures, failed_transaction, run_shard_transaction

log = logging.getLogger(__name__)

RESULT_SCHEMA = pa.schema([("shard", pa.int32()), ("published", pa.string()), ("failure", pa.binary()),
                           ("seconds", pa.float64())])
RESULT_DDL = "shard INT, published STRING, failure BINARY, seconds DOUBLE"


@dataclass(frozen=True)
class TaskBrief:
    """What the driver tells every task of the publishing job (pickled with the task function)."""

    settings: SinkSettings
    batch_id: int
    pending: frozenset[int]  # the shards to publish; the others answer NOT_PENDING
    figures: tuple[ShardFigures, ...]  # per shard, from phase 1
    source_offsets: str  # the digest of the batch's offsets/N (SourceOffsets.digest)
    faults: faults.DriverFaults  # the crash tests' faults, which kill the driver (faults.py)


@dataclass(frozen=True)
class ShardResult:
    """What a publishing task did with its shard: the records it published per topic (none for a
    shard published before, or not pending), or the failure it met, which the driver raises."""

    shard: int
    published: dict[str, int]
    failure: JobFailure | None = None
    seconds: float = 0.0

    def as_batch(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist([{
            "shard": self.shard, "published": json.dumps(self.published), "seconds": self.seconds,
            "failure": None if self.failure is None else pickle.dumps(self.failure)}], schema=RESULT_SCHEMA)

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> ShardResult:
        failure = None if row["failure"] is None else pickle.loads(row["failure"])
        return cls(row["shard"], json.loads(row["published"]), failure, row["seconds"])


def publish_task(brief: TaskBrief) -> TaskFunction:
    """The function mapInArrow runs in each task of the publishing job: one result row per task."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None, "a publishing task runs in a Spark task"
        yield publish_part(brief, context.partitionId(), batches).as_batch()

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


def publish_part(brief: TaskBrief, shard: int, batches: Iterator[pa.RecordBatch]) -> ShardResult:
    """Publish shard `shard`'s part of the batch (`batches`: its records, read once), or say why not."""
    started = time.monotonic()
    settings, batch_id = brief.settings, brief.batch_id
    if shard not in brief.pending:  # the driver found it published before the job started
        return ShardResult(shard, {})
    faults.in_task_of(brief.faults)
    try:
        producers, states = start_shards(settings, [shard])
        try:
            state = states[shard]
            match fate(state, batch_id, brief.source_offsets):
                case Fate.PUBLISHED_BEFORE:
                    return ShardResult(shard, {}, seconds=time.monotonic() - started)
                case Fate.AHEAD:
                    raise checkpoint_behind_output(settings, batch_id, state.batch_id, shard,
                                                   f"Shard {shard}'s publishing task published nothing.")
            published = run_shard_transaction(settings, producers[shard], _one_pass(batches, shard), batch_id,
                                brief.source_offsets, expected=brief.figures[shard], retries=0)
            return ShardResult(shard, dict(published), seconds=time.monotonic() - started)
        finally:
            producers[shard].producer.flush(0)
    except JobFailure as failure:
        return ShardResult(shard, {}, failure, time.monotonic() - started)
    except KafkaException as error:  # from init_transactions or the marker read
        return ShardResult(shard, {}, failed_transaction(settings, shard, batch_id, error.args[0]),
                           time.monotonic() - started)


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
