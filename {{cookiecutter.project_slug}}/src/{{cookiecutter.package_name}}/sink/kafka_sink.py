"""The Kafka sink, called by Spark once per micro-batch (`foreachBatch`) with the batch's
records (`topic STRING, key BINARY, value BINARY`, and `headers` where the query keeps its input's:
batch_records.HEADERS; for exactly-once also each record's hash and commit shard, `for_commit` in
the query's plan); `delivery.guarantee` chooses the protocol. The records carry nothing of the
batch id: the sink stamps each one as it produces it (batch_records.with_batch_id, and a header),
so that a batch costs the driver no plan of its own, only phase 1's job.

- exactly-once: phase 1 is the batch's one execution. Then phase 2 publishes the records in one
  Kafka transaction per commit shard (coordinator.py), from one of two places:
  - Spark tasks (publishing_tasks.py), one per shard: the records stay on the executors, cached
    (distributed_records.py), and the driver receives each shard's figures, never a record; the
    publishing grows with the cluster;
  - the driver, for a small batch: Spark hands it the records as Arrow (`toArrow`, JVM to driver,
    no Python worker) and the driver's producers, kept from batch to batch, publish them. A
    small batch is then spared a second Spark job and the start of a producer per shard.
  `publish_from` chooses: "tasks", "driver" (unless the batch exceeds spark.driver.maxResultSize),
  or "auto": the driver for a batch predicted small (Placement), tasks otherwise; a batch
  computed on the executors that turns out small (its figures) is handed to the driver from the
  cache, which costs a small Spark job instead of the publishing job and its shards' producers.
  Spark writes the batch's `commits/N` only after this returns.
- at-least-once: each task produces straight to Kafka; a batch that Spark re-runs after a
  crash is published again (what Spark's built-in Kafka sink does).

Why tasks do not stage their part on storage, Flink-style: a batch without `commits/N` is
always run again by Spark, from the same offsets (`offsets/N`) and the same state version, so
its records are recomputed, not recovered; the batch markers decide what the re-run still
publishes (distributed_records.py says more).

Why foreachBatch and not a Python data source writer: Spark 4.2 refuses Update mode for Python
data sources, and Update mode is what Spark's own aggregation needs to emit only changed keys.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..failures import JobFailure, Outcome
from ..storage.checkpoint import SourceOffsets
from . import faults
from .at_least_once import publish_at_least_once
from .batch_records import DIGEST, SHARD, CombinedRecords, InlineRecords, result_too_large
from .coordinator import BatchPublished, commit_batch
from .distributed_records import DistributedRecords, distribute
from .placement import Placement
from .producers import ProducerPool
from .publishing_tasks import WorkerWarmUp
from .settings import SinkSettings

if TYPE_CHECKING:
    from ..config import Guarantee

log = logging.getLogger(__name__)

AT_LEAST_ONCE: Guarantee = "at-least-once"

# Turns a batch's read-back requests (records without a topic) into its records: (session, their keys, batch id).
ReadBack = Callable[[SparkSession, list[bytes], int], DataFrame]


class StoppingBeforeBatch(JobFailure):
    """A batch reached the sink after the job began to stop (runner.stop_at_batch_boundary)."""

    outcome = Outcome.ASKED_TO_STOP


class KafkaSink:
    """A `foreachBatch` function. Everything is derived from the settings and the batch id,
    so a batch that Spark runs again after a crash publishes the same records. It owns its
    producers (one per commit shard, kept from batch to batch) and remembers what it published
    for the last few batches, for the runner's log lines."""

    BATCHES_REMEMBERED = 32  # several batches can end between two of the runner's polls

    def __init__(self, settings: SinkSettings, guarantee: Guarantee, read_back: ReadBack | None = None,
                 stopping: threading.Event | None = None) -> None:
        self.settings = settings
        self.guarantee = guarantee
        self.read_back = read_back
        self.stopping = stopping  # set by the runner: the job stops, no new batch starts publishing
        self.pool = ProducerPool()
        self.placement = Placement(settings.publish_from)
        self.workers = WorkerWarmUp()
        self._published: OrderedDict[int, BatchPublished] = OrderedDict()
        self._failure: BaseException | None = None

    def take_failure(self) -> BaseException | None:
        """The exception the last batch failed with, as the sink raised it: foreachBatch runs in
        this process, but Spark hands the runner only a Java exception whose message quotes it.
        The runner judges this one (failures.verdict), by its type."""
        failure, self._failure = self._failure, None
        return failure

    def published(self, batch_id: int) -> BatchPublished | None:
        """What the exactly-once protocol published for a recent batch, if it ran here."""
        return self._published.get(batch_id)

    def start_producers_meanwhile(self) -> None:
        """Start the commit shards' producers in a thread (exactly-once), for the query's start to
        run beside them: the first batch then waits only for what is left of their start."""
        self.pool.start_meanwhile(self.settings, self.stopping)

    @property
    def producers_start_seconds(self) -> float:
        """What the last start of the commit shards' producers took (their part of a batch's time)."""
        return self.pool.start_seconds

    def __call__(self, output: DataFrame, batch_id: int) -> None:
        self._failure = None
        try:
            self._run_batch(output, batch_id)
        except BaseException as error:
            self._failure = error
            raise

    def _run_batch(self, output: DataFrame, batch_id: int) -> None:
        if self.stopping is not None and self.stopping.is_set():
            # Ends the query with this batch planned, not published: the next start runs it.
            raise StoppingBeforeBatch(f"batch {batch_id} not started: the job is stopping")
        started = time.monotonic()
        if self.guarantee == AT_LEAST_ONCE:
            publish_at_least_once(self.settings, output, batch_id,
                                  lambda read_back_keys: self._read_back(output.sparkSession, read_back_keys, batch_id))
        else:
            offsets = SourceOffsets.of_batch(self.settings.checkpoint, batch_id)
            if self.placement.previous_offsets is None:  # the first batch of this run: where the one before ended
                checkpoint = self.settings.checkpoint
                self.placement.previous_offsets = (SourceOffsets.of_batch(checkpoint, batch_id - 1) if batch_id
                                                   else SourceOffsets.initial(checkpoint))
            # Phase 1: the batch's one execution; its records on the driver or on the executors.
            batch = self._compute(output.sparkSession, output, batch_id, offsets)
            computed = time.monotonic()
            try:
                # Phase 2, once every task of the batch succeeded.
                if (published := commit_batch(self.settings, batch, batch_id, self.pool, self.stopping,
                                              offsets)) is not None:
                    self._published[batch_id] = dataclasses.replace(
                        published, phase1_seconds=computed - started)
                    while len(self._published) > self.BATCHES_REMEMBERED:
                        self._published.popitem(last=False)
            finally:
                if isinstance(batch, DistributedRecords):
                    batch.release()
                    self.workers.used()
        faults.maybe_crash(faults.WRITING_SPARK_COMMIT, batch_id, self.settings.checkpoint)

    def _compute(self, spark: SparkSession, records: DataFrame, batch_id: int, offsets: SourceOffsets
                 ) -> InlineRecords | CombinedRecords | DistributedRecords:
        """The batch's records, and those its read-back requests name: on the driver where Placement says
        so and they fit in spark.driver.maxResultSize, else on the executors."""
        if self.placement.on_driver(offsets):
            inline = self._collect(records, batch_id, "output")
            if inline is not None and not inline.read_back_keys:
                return self.placement.observed(offsets, inline)
            if inline is not None:
                read_back = self._collect(for_commit(self._read_back(spark, inline.read_back_keys, batch_id),
                                                     self.settings.shards), batch_id, "read-back")
                if read_back is not None:
                    return self.placement.observed(offsets, CombinedRecords([inline, read_back]))
        self.workers.before_phase_1(spark, self.settings.shards)
        distributed = distribute(records, self.settings.shards)
        if distributed.read_back_keys:
            more = for_commit(self._read_back(spark, distributed.read_back_keys, batch_id), self.settings.shards)
            first = distributed
            published = first.frame.where(F.col("topic").isNotNull()).select(*more.columns)
            try:  # the first part stays cached until the whole batch is
                distributed = distribute(published.unionByName(more), self.settings.shards)
            finally:
                first.release()
        if self.placement.small(sum(distributed.rows_per_shard), distributed.size_bytes):
            try:  # predicted big, found small (a first batch that aggregates many events): the driver publishes
                return self.placement.observed(offsets, InlineRecords.of(distributed.frame.toArrow(),
                                                                         self.settings.shards))
            finally:
                distributed.release()
        return self.placement.observed(offsets, distributed)

    def _collect(self, records: DataFrame, batch_id: int, part: str) -> InlineRecords | None:
        """The records on the driver, or None past spark.driver.maxResultSize (Spark then
        computes them again, on the executors: the same records, from the same shuffle and
        state version, as Spark's foreachBatch documentation allows)."""
        try:
            return InlineRecords.of(records.toArrow(), self.settings.shards)
        except Py4JJavaError as error:
            if not result_too_large(error):
                raise
        log.warning("batch %d: its %s exceeds spark.driver.maxResultSize; Spark tasks publish it", batch_id, part)
        return None

    def _read_back(self, spark: SparkSession, read_back_keys: list[bytes], batch_id: int) -> DataFrame:
        if self.read_back is None:
            raise RuntimeError(f"batch {batch_id}: {len(read_back_keys)} records without a topic, and no read-back")
        return self.read_back(spark, read_back_keys, batch_id)


def for_commit(records: DataFrame, shards: int) -> DataFrame:
    """Each record's hash (its part of the shard's digest, which a re-run is compared by) and its
    commit shard from its topic and key, so that a re-run of the batch puts every record in the
    shard it had (a shard whose marker has the batch publishes nothing again). The hash covers
    every column of the records (`*`: topic, key, value, and HEADERS where the query keeps them),
    the value as the query makes it: the batch id the sink stamps on it is the same for every
    record of the batch and every run of it. Part of the query's plan (job.py), so no batch pays
    for it on the driver; per batch only for the records read back."""
    shard = "0" if shards == 1 else f"pmod(xxhash64(topic, key), {int(shards)})"
    return records.selectExpr("*", f"xxhash64(*) AS {DIGEST}", f"CAST({shard} AS INT) AS {SHARD}")
