"""The chaos run's input: produced in chunks while the job runs, and its end offsets."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..kafka_io import produce

QUIET = {"log_level": 2}  # librdkafka: no connection-refused lines while the broker restarts


class InputProducer(threading.Thread):
    """Produces the input in chunks, a few seconds apart, while the job runs. Idempotent and
    patient (a broker restart only delays it); the verifier reads back what the topic holds."""

    def __init__(self, bootstrap_servers: str, topic: str, values: list[bytes], partitions: int,
                 chunks: int, interval: float, say: Callable[[str], None]) -> None:
        super().__init__(name="chaos-input", daemon=True)
        self.bootstrap_servers, self.topic, self.values = bootstrap_servers, topic, values
        self.partitions, self.chunks, self.interval, self.say = partitions, chunks, interval, say
        self.produced = 0
        self.errors: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({
            "bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True, "linger.ms": 20,
            "message.timeout.ms": 900_000, **QUIET,
        })

        def on_delivery(error: Any, _message: Any) -> None:
            if error is not None:
                self.errors.append(str(error))

        try:
            size = -(-len(self.values) // self.chunks)
            for chunk, start in enumerate(range(0, len(self.values), size)):
                if chunk:
                    time.sleep(self.interval)
                for i in range(start, min(start + size, len(self.values))):
                    produce(producer, self.topic, self.values[i], partition=i % self.partitions,
                            on_delivery=on_delivery)
                while producer.flush(5.0):
                    pass  # the broker may be restarting: the idempotent producer retries
                self.produced = min(start + size, len(self.values))
            self.say(f"input: all {self.produced} records produced to {self.topic}"
                     + (f" ({len(self.errors)} delivery errors: {self.errors[:2]})" if self.errors else ""))
        except Exception as error:  # noqa: BLE001 - reported; the verifier reads what the topic holds
            self.errors.append(repr(error))
            self.say(f"input: producer failed: {error!r}")
        finally:
            self.done.set()


def end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """The input's end offsets (its last stable offsets: the input is not transactional)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"chaos-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, **QUIET})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in sorted(metadata.partitions)}
    finally:
        consumer.close()
