"""Where phase 2 publishes a batch from: the driver, or Spark tasks (kafka_sink.py runs both)."""

from __future__ import annotations

from typing import TypeVar

from ..storage.checkpoint import SourceOffsets
from .batch_records import CombinedRecords, InlineRecords
from .distributed_records import DistributedRecords

_Batch = TypeVar("_Batch", InlineRecords, CombinedRecords, DistributedRecords)


class Placement:
    """Where phase 2 publishes a batch from (publish_from). With "auto": from the driver when the
    batch is expected small, its predicted records at most DRIVER_MAX_ROWS and DRIVER_MAX_BYTES;
    from Spark tasks otherwise. The prediction: the batch's input records (its `offsets/N`
    against the previous batch's) times the previous batch's records per input record (one, for
    the first batch of a run), and at least the previous batch's records: a backlog after a quiet
    spell goes to the tasks from its first batch, and a few keys counted over many events stay on
    the driver. A batch whose input cannot be told (another kind of source) goes to the tasks.
    A batch sent to the tasks whose records, once computed, are as few (`small`: a first batch
    that counts many events of few keys) goes back to the driver, from the executors' cache.

    Why the bound: a publishing job has a fixed cost per batch that more executors do not shrink
    (scheduling the job, each task's producer start and `init_transactions`, its marker read),
    while the driver's producers, kept from batch to batch, publish a batch of this size sooner
    than that cost. Somewhat past the bound, the tasks' parallel publishing wins on a cluster; the
    bound stays below that, where the driver wins on any number of executors. The batch lines
    (phase 1, phase 2) of this command in a stateless rendering, with `--publish-from tasks` and
    then `driver`, measure both places:
    `{{ cookiecutter.project_slug }}-tools bench --contenders eos,spark_kafka_job --no-recovery`"""

    DRIVER_MAX_ROWS = 65_536
    DRIVER_MAX_BYTES = 8 << 20

    def __init__(self, publish_from: str) -> None:
        self.publish_from = publish_from
        self.previous_offsets: SourceOffsets | None = None  # where the previous batch ended
        self._last: tuple[int, int, int] | None = None  # its input records, records and bytes

    def on_driver(self, offsets: SourceOffsets) -> bool:
        if self.publish_from != "auto":
            return self.publish_from == "driver"
        span = None if self.previous_offsets is None else offsets.records_since(self.previous_offsets)
        if span is None:
            return False
        if self._last is None:  # no records per input known yet: one each, as a query without aggregation
            return span <= self.DRIVER_MAX_ROWS
        inputs, rows, size = self._last
        per_input = (rows / inputs, size / inputs) if inputs else (0.0, 0.0)
        return self.small(max(rows, span * per_input[0]), max(size, span * per_input[1]))

    def small(self, rows: float, size: float) -> bool:
        """Whether "auto" publishes a batch of this many records and bytes from the driver."""
        return self.publish_from == "auto" and rows <= self.DRIVER_MAX_ROWS and size <= self.DRIVER_MAX_BYTES

    def observed(self, offsets: SourceOffsets, batch: _Batch) -> _Batch:
        span = None if self.previous_offsets is None else offsets.records_since(self.previous_offsets)
        self._last = None if span is None else (span, sum(batch.rows_per_shard), batch.size_bytes)
        self.previous_offsets = offsets
        return batch
