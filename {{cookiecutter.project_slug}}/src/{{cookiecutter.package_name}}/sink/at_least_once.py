"""The at-least-once writer: each sink task produces its records straight to Kafka with an
idempotent (not transactional) producer. A batch that Spark re-runs after a crash is published
again, as with Spark's built-in Kafka sink. A task returns the keys of the read-back requests among its records
(no topic: batch_records.py), for the sink to read back and produce in turn."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from confluent_kafka import KafkaError, Message

from ..kafka.client import librdkafka_config
from . import faults
from .batch_records import record_headers, stamped_values
from .producing import produce
from .settings import PARTITIONER, SinkSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# A task's function for mapInArrow: its records in, the keys of its read-back requests out.
TaskFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
TASK_OUTPUT = "read_back_key BINARY"
TASK_OUTPUT_SCHEMA = pa.schema([("read_back_key", pa.binary())])


def publish_at_least_once(settings: SinkSettings, output: DataFrame, batch_id: int,
                          read_back: Callable[[list[bytes]], DataFrame]) -> None:
    """Batch `batch_id`'s records produced by Spark tasks, then those its read-back requests name (read
    back). Each fault point means here what it means to the exactly-once protocol: Kafka untouched
    before the produce, the records visible after it (a crash then makes Spark re-run, and
    re-publish, the batch)."""
    for point in faults.BEFORE_KAFKA:
        faults.maybe_crash(point, batch_id)
    task = produce_task(settings, batch_id)
    read_back_keys = [row[0] for row in output.mapInArrow(task, TASK_OUTPUT).collect()]
    if read_back_keys:
        read_back(read_back_keys).mapInArrow(task, TASK_OUTPUT).collect()
    for point in faults.AFTER_PRODUCE:
        faults.maybe_crash(point, batch_id)


def produce_task(settings: SinkSettings, batch_id: int) -> TaskFunction:
    def produce_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read_back_keys: list[bytes] = []
        produce_now(settings, batch_id, batches, read_back_keys)
        yield pa.RecordBatch.from_pydict({"read_back_key": read_back_keys}, schema=TASK_OUTPUT_SCHEMA)

    return produce_partition


def produce_now(settings: SinkSettings, batch_id: int, batches: Iterator[pa.RecordBatch],
                read_back_keys: list[bytes] | None = None) -> int:
    """Produce every record with a topic, stamped with Spark's batch `batch_id` as published
    (its value, with_batch_id, and its header, SinkSettings.batch_header) and with its own headers
    (batch_records.HEADERS); the others' keys go to `read_back_keys`."""
    from confluent_kafka import Producer

    headers, published_id = settings.batch_header(batch_id), settings.output_batch_id(batch_id)
    producer = Producer(librdkafka_config(settings.bootstrap_servers, settings.client, {
        "enable.idempotence": True, "linger.ms": 5, "partitioner": PARTITIONER,
    }))
    errors: list[str] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            errors.append(str(error))

    rows = 0
    for batch in batches:
        own = record_headers(batch, headers) or [headers] * batch.num_rows
        columns = (batch.column("topic").to_pylist(), batch.column("key").to_pylist(),
                   stamped_values(batch, published_id, settings.avro_topics, settings.protobuf_topics).to_pylist())
        for topic, key, value, record_header in zip(*columns, own, strict=True):
            if topic is None:
                if read_back_keys is not None:
                    read_back_keys.append(key)
                continue
            rows += 1
            produce(producer, topic, key, value, record_header, on_delivery)
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"at-least-once sink: {remaining} records undelivered, errors: {errors[:3]}")
    return rows
