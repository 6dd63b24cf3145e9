"""The Kafka sink, called by Spark once per micro-batch (`foreachBatch`) with the batch's
records (`topic STRING, key BINARY, value BINARY`); `delivery.guarantee` chooses the protocol.

- exactly-once: phase 1 stages each task's records under the checkpoint (stage.py), in the
  batch's one execution; phase 2 publishes them in one Kafka transaction per shard from the
  driver (coordinator.py). Spark writes the batch's `commits/N` only after this returns.
- at-least-once: each task produces straight to Kafka; a batch that Spark re-runs after a
  crash is published again (what Spark's built-in Kafka sink does).

Why foreachBatch and not a Python data source writer (DESIGN §4 maps the phases onto its
`write()` and `commit()`): Spark 4.2 refuses Update mode for Python data sources, and Update
mode is what Spark's own aggregation needs to emit only the changed keys. The phases and their
guarantees are the same: tasks stage, the driver commits after every task succeeded and before
the batch's commit log entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame

from . import faults
from .at_least_once import TaskFunction, produce_task
from .coordinator import commit_batch
from .settings import SinkSettings
from .stage import StagedFile, stage

AT_LEAST_ONCE = "at-least-once"
_MESSAGE_SCHEMA = "path STRING, rows BIGINT, sha256 STRING"

# Builds a batch's Kafka records from the query's output, given the batch id.
Encoder = Callable[[DataFrame, int], DataFrame]


class KafkaSink:
    """A `foreachBatch` function. Everything is derived from the settings and the batch id,
    so a batch that Spark runs again after a crash stages and publishes the same records."""

    def __init__(self, settings: SinkSettings, guarantee: str, encode: Encoder) -> None:
        self.settings = settings
        self.guarantee = guarantee
        self.encode = encode

    def __call__(self, output: DataFrame, batch_id: int) -> None:
        records = self.encode(output, batch_id)
        if self.guarantee == AT_LEAST_ONCE:
            records.mapInArrow(produce_task(self.settings, batch_id), "rows BIGINT").collect()
            # Records are already visible; a crash here makes Spark re-run (and re-publish) the batch.
            for point in faults.POINTS[1:-1]:
                faults.maybe_crash(point, batch_id)
        else:
            # Phase 1, on executors: the batch's one execution, every task stages its records.
            rows = records.mapInArrow(_stage_task(self.settings, batch_id), _MESSAGE_SCHEMA).collect()
            # Phase 2, on the driver, once every task of the batch succeeded.
            staged = [StagedFile(path=r.path, rows=r.rows, sha256=r.sha256) for r in rows]
            commit_batch(self.settings, staged, batch_id)
        faults.maybe_crash(faults.WRITING_SPARK_COMMIT, batch_id, self.settings.checkpoint)


def _stage_task(settings: SinkSettings, batch_id: int) -> TaskFunction:
    checkpoint, sink_id = settings.checkpoint, settings.sink_id

    def stage_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        message = stage(checkpoint, sink_id, batch_id, context.partitionId(), context.attemptNumber(), batches)
        message = message or StagedFile(path="", rows=0, sha256="")
        faults.maybe_crash(faults.SINK_TASK, batch_id)
        yield pa.RecordBatch.from_pydict({"path": [message.path], "rows": [message.rows], "sha256": [message.sha256]})

    return stage_partition
