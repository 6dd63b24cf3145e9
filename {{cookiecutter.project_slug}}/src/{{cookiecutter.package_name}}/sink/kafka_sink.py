"""The Kafka sink as a Spark data source: `delivery.guarantee` chooses the protocol.

- exactly-once: phase 1 stages each task's records under the checkpoint (stage.py); phase 2
  publishes them in one Kafka transaction from the driver (coordinator.py).
- at-least-once: each task produces straight to Kafka; a batch that Spark re-runs after a
  crash is published again (what Spark's built-in Kafka sink does).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

from ..kafka_client import librdkafka_config
from . import faults
from .coordinator import PARTITIONER, SinkSettings, commit_batch
from .records import output_records
from .stage import STAGED_SCHEMA, StagedFile, stage

SINK_NAME = "kafka_eos_sink"


@dataclass(frozen=True)
class Published(WriterCommitMessage):
    """The at-least-once commit message: records already in Kafka."""

    rows: int


class KafkaSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def streamWriter(self, schema, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(dict(self.options))


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Spark builds a new writer for every batch and for every commit: everything here is
    derived from the options, the batch id and the partition id, never from random values."""

    def __init__(self, options: dict[str, str]) -> None:
        self.guarantee = options["delivery.guarantee"]
        self.output_topic = options["output.topic"]
        self.dead_letter_topic = options["dead.letter.topic"]
        self.settings = SinkSettings(
            bootstrap_servers=options["bootstrap.servers"],
            checkpoint=options["checkpointlocation"],
            sink_id=options["sink.id"],
            transactional_id_prefix=options["transactional.id.prefix"],
            marker_topic=options["marker.topic"],
            shards=int(options.get("commit.shards", "1")),
            commit_timeout_seconds=float(options.get("commit.timeout.seconds", "60")),
            staging_retention_batches=int(options.get("staging.retention.batches", "2")),
            client=json.loads(options.get("kafka.client.config", "{}")),
        )

    # Phase 1, on executors.
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        context = TaskContext.get()
        batch_id = int(context.getLocalProperty("streaming.sql.batchId"))
        tables = [output_records(b, batch_id, self.output_topic, self.dead_letter_topic) for b in iterator]
        rows = pa.concat_tables(tables) if tables else STAGED_SCHEMA.empty_table()
        message: WriterCommitMessage
        if self.guarantee == "at-least-once":
            message = Published(rows=_produce_now(self.settings.bootstrap_servers, self.settings.client, rows))
        elif rows.num_rows == 0:
            message = StagedFile(path="", rows=0, sha256="")
        else:
            message = stage(self.settings.checkpoint, self.settings.sink_id, batch_id,
                            context.partitionId(), context.attemptNumber(), rows)
        faults.maybe_crash(faults.SINK_TASK, batch_id)
        return message

    # Phase 2, on the driver, once every task of the batch succeeded.
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.guarantee == "at-least-once":
            # Records are already visible; a crash here makes Spark re-run (and re-publish) the batch.
            for point in faults.POINTS[1:]:
                faults.maybe_crash(point, batchId)
            return
        commit_batch(self.settings, [m for m in messages if isinstance(m, StagedFile)], batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Best effort and never called on a crash: staged files of a failed batch are simply
        not named by any commit message, and are removed with the batch's staging directory."""


def _produce_now(bootstrap_servers: str, client: Mapping[str, str], rows: pa.Table) -> int:
    from confluent_kafka import Producer

    producer = Producer(librdkafka_config(bootstrap_servers, client, {
        "enable.idempotence": True, "linger.ms": 5, "partitioner": PARTITIONER,
    }))
    errors: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            errors.append(str(error))

    for topic, key, value in zip(*(rows.column(c).to_pylist() for c in ("topic", "key", "value")), strict=True):
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"at-least-once sink: {remaining} records undelivered, errors: {errors[:3]}")
    return rows.num_rows
