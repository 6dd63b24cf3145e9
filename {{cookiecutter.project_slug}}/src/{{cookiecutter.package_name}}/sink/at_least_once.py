"""The at-least-once writer: each sink task produces its records straight to Kafka with an
idempotent (not transactional) producer. A batch that Spark re-runs after a crash is published
again, as with Spark's built-in Kafka sink."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pyarrow as pa

from ..kafka_client import librdkafka_config
from .settings import PARTITIONER, SinkSettings

# A task's function for mapInArrow: its rows in, one summary row out.
TaskFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def produce_task(settings: SinkSettings) -> TaskFunction:
    bootstrap_servers, client = settings.bootstrap_servers, settings.client

    def produce_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"rows": [produce_now(bootstrap_servers, client, batches)]})

    return produce_partition


def produce_now(bootstrap_servers: str, client: Mapping[str, str], batches: Iterator[pa.RecordBatch]) -> int:
    from confluent_kafka import Producer

    producer = Producer(librdkafka_config(bootstrap_servers, client, {
        "enable.idempotence": True, "linger.ms": 5, "partitioner": PARTITIONER,
    }))
    errors: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            errors.append(str(error))

    rows = 0
    for batch in batches:
        for topic, key, value in zip(*(batch.column(c).to_pylist() for c in ("topic", "key", "value")), strict=True):
            while True:
                try:
                    producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
        rows += batch.num_rows
    remaining = producer.flush(120)
    if remaining or errors:
        raise RuntimeError(f"at-least-once sink: {remaining} records undelivered, errors: {errors[:3]}")
    return rows
