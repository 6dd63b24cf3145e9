"""The Kafka sink, called by Spark once per micro-batch (`foreachBatch`) with the batch's
records (`topic STRING, key BINARY, value BINARY`); `delivery.guarantee` chooses the protocol.

- exactly-once: phase 1 is the batch's one execution: Spark computes its records and hands them
  to the driver as Arrow (`toArrow`, JVM to driver, no Python worker), or, for a batch larger
  than spark.driver.maxResultSize, stages them as Parquet under the checkpoint
  (batch_records.py); phase 2 publishes them in one Kafka transaction per shard
  (coordinator.py). Spark writes the batch's `commits/N` only after this returns.
- at-least-once: each task produces straight to Kafka; a batch that Spark re-runs after a
  crash is published again (what Spark's built-in Kafka sink does).

Why tasks do not stage their part on storage, Flink-style: a batch without `commits/N` is
always run again by Spark, from the same offsets (`offsets/N`) and the same state version, so
its records are recomputed, not recovered; the batch markers decide what the re-run still
publishes. Staged files would only be a transport from executors to the driver, which Arrow
does without the storage round trip and without Python workers to start.

Why foreachBatch and not a Python data source writer: Spark 4.2 refuses Update mode for Python
data sources, and Update mode is what Spark's own aggregation needs to emit only changed keys.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..failures import JobFailure, Outcome
from ..observability import metrics
from . import faults
from .at_least_once import TASK_OUTPUT, produce_task
from .batch_records import (
    DIGEST,
    SHARD,
    BatchRecords,
    CombinedRecords,
    InlineRecords,
    StagedRecords,
    StagingForecast,
    result_too_large,
    staging_location,
)
from .coordinator import Published, commit_batch
from .producers import ProducerPool
from .settings import SinkSettings

if TYPE_CHECKING:
    from ..config import Guarantee

log = logging.getLogger(__name__)

AT_LEAST_ONCE: Guarantee = "at-least-once"

# Builds a batch's Kafka records from the query's output, given the batch id.
Encoder = Callable[[DataFrame, int], DataFrame]
# Turns a batch's references (records without a topic) into its records: (session, keys, batch id).
ReadBack = Callable[[SparkSession, list[bytes], int], DataFrame]


class StoppingBeforeBatch(JobFailure):
    """A batch reached the sink after the job began to stop (runner.stop_at_batch_boundary)."""

    outcome = Outcome.STOPPING


class KafkaSink:
    """A `foreachBatch` function. Everything is derived from the settings and the batch id,
    so a batch that Spark runs again after a crash publishes the same records. It owns its
    producers (one per commit shard, kept from batch to batch) and remembers what it published
    for the last few batches, for the runner's log lines."""

    BATCHES_REMEMBERED = 32  # several batches can end between two of the runner's polls

    def __init__(self, settings: SinkSettings, guarantee: Guarantee, encode: Encoder, read_back: ReadBack | None = None,
                 stopping: threading.Event | None = None) -> None:
        self.settings = settings
        self.guarantee = guarantee
        self.encode = encode
        self.read_back = read_back
        self.stopping = stopping  # set by the runner: the job stops, no new batch starts publishing
        self.pool = ProducerPool()
        self.forecast = StagingForecast()
        self._result_limit: int | None = None  # spark.driver.maxResultSize in bytes, read at the first batch
        self._published: OrderedDict[int, Published] = OrderedDict()
        self._failure: BaseException | None = None

    def take_failure(self) -> BaseException | None:
        """The exception the last batch failed with, as the sink raised it: foreachBatch runs in
        this process, but Spark hands the runner only a Java exception whose message quotes it.
        The runner judges this one (failures.verdict), by its type."""
        failure, self._failure = self._failure, None
        return failure

    def published(self, batch_id: int) -> Published | None:
        """What the exactly-once protocol published for a recent batch, if it ran here."""
        return self._published.get(batch_id)

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
        records = self.encode(output, batch_id)
        if self.guarantee == AT_LEAST_ONCE:
            produce = produce_task(self.settings, batch_id)
            references = [row[0] for row in records.mapInArrow(produce, TASK_OUTPUT).collect()]
            if references:
                more = self._read_back(output.sparkSession, references, batch_id)
                more.mapInArrow(produce, TASK_OUTPUT).collect()
            # Records are already visible; a crash here makes Spark re-run (and re-publish) the batch.
            for point in faults.POINTS[:-1]:
                faults.maybe_crash(point, batch_id)
        else:
            # Phase 1: the batch's one execution, its records on the driver (or staged), then
            # the records its references name.
            computed = self._compute(records, batch_id, "output")
            batch: BatchRecords = computed
            if computed.references:
                more = self._read_back(output.sparkSession, computed.references, batch_id)
                batch = CombinedRecords([computed, self._compute(more, batch_id, "read-back")])
            # Phase 2, on the driver, once every task of the batch succeeded.
            if (published := commit_batch(self.settings, batch, batch_id, self.pool, self.stopping)) is not None:
                self._published[batch_id] = published
                while len(self._published) > self.BATCHES_REMEMBERED:
                    self._published.popitem(last=False)
        faults.maybe_crash(faults.WRITING_SPARK_COMMIT, batch_id, self.settings.checkpoint)

    def _compute(self, records: DataFrame, batch_id: int, part: str) -> InlineRecords | StagedRecords:
        if self._result_limit is None:
            self._result_limit = result_limit_bytes(records.sparkSession)
        computed = compute(for_commit(records, self.settings.shards), self.settings, batch_id, part,
                           stage_first=self.forecast.stage_first(part))
        self.forecast.observe(part, computed, self._result_limit)
        return computed

    def _read_back(self, spark: SparkSession, references: list[bytes], batch_id: int) -> DataFrame:
        if self.read_back is None:
            raise RuntimeError(f"batch {batch_id}: {len(references)} records without a topic, and no read-back")
        return self.read_back(spark, references, batch_id)


def compute(records: DataFrame, settings: SinkSettings, batch_id: int, part: str, stage_first: bool = False
            ) -> InlineRecords | StagedRecords:
    """The batch's records, inline; past spark.driver.maxResultSize, staged by the executors.
    `stage_first`: staged without trying the driver first (StagingForecast)."""
    location = staging_location(settings.checkpoint, settings.sink_id, batch_id, part)
    if stage_first:
        log.info("batch %d: the last batch's %s was past spark.driver.maxResultSize; the executors stage "
                 "this one at once at %s", batch_id, part, location)
    else:
        try:
            return InlineRecords.of(records.toArrow(), settings.shards)
        except Py4JJavaError as error:
            if not result_too_large(error):
                raise
        log.warning("batch %d: its records exceed spark.driver.maxResultSize; the executors stage them at %s",
                    batch_id, location)
    writer = records.write.mode("overwrite")  # a crashed run's files for this batch are replaced
    # The checkpoint's own URI: Spark reaches it as it reaches the checkpoint (s3:// too, via S3A).
    (writer.partitionBy(SHARD) if settings.shards > 1 else writer).parquet(location)
    staged = StagedRecords.read(location, settings.shards)
    metrics.STAGED_BYTES.labels(settings.sink_id).inc(staged.size_bytes)
    return staged


def result_limit_bytes(spark: SparkSession) -> int:
    """spark.driver.maxResultSize in bytes (0: no limit), parsed as Spark parses it."""
    setting = spark.sparkContext.getConf().get("spark.driver.maxResultSize", "1g")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return int(jvm.org.apache.spark.network.util.JavaUtils.byteStringAsBytes(setting))


def for_commit(records: DataFrame, shards: int) -> DataFrame:
    """Each record's hash (its part of the shard's digest, which a re-run is compared by) and,
    with several shards, its commit shard from its topic and key, so that a re-run of the batch
    puts every record in the shard it had (a shard whose marker has the batch publishes nothing again)."""
    records = records.withColumn(DIGEST, F.xxhash64("topic", "key", "value"))
    if shards == 1:
        return records
    return records.withColumn(SHARD, F.pmod(F.xxhash64("topic", "key"), F.lit(shards)).cast("int"))
