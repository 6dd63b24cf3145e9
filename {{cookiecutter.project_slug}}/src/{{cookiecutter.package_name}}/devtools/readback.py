"""Read what the job published, as a downstream consumer must: with read_committed."""

from __future__ import annotations

import json
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition


@dataclass
class Published:
    """Every published count, per key in publication order, and the dead letters."""

    counts: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))  # (batch, count)
    dead_letters: list[dict] = field(default_factory=list)

    def final_counts(self) -> dict[str, int]:
        return {key: history[-1][1] for key, history in self.counts.items()}


def read_topic(bootstrap_servers: str, topic: str, isolation: str = "read_committed",
               timeout: float = 60.0) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) up to the end of every partition as seen at call time."""
    return [(message.key(), message.value()) for message in _read(bootstrap_servers, topic, isolation, timeout)]


def read_positions(bootstrap_servers: str, topic: str, timeout: float = 60.0
                   ) -> list[tuple[int, int, bytes | None]]:
    """Every committed record as (partition, offset, value): where the input put each event."""
    return [(message.partition(), message.offset(), message.value())
            for message in _read(bootstrap_servers, topic, "read_committed", timeout)]


def _read(bootstrap_servers: str, topic: str, isolation: str, timeout: float) -> list[Message]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"readback-{uuid.uuid4().hex}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        assignment = []
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            if high > low:
                assignment.append(TopicPartition(topic, partition, low))
        if not assignment:
            return []
        consumer.assign(assignment)
        remaining = {tp.partition for tp in assignment}
        records: list[Message] = []
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        remaining.discard(message.partition())
                        continue
                    raise RuntimeError(f"reading {topic}: {error}")
                records.append(message)
        if remaining:
            raise TimeoutError(f"reading {topic}: partitions {sorted(remaining)} not read to the end in {timeout}s")
        return records
    finally:
        consumer.close()


def read_published(bootstrap_servers: str, output_topic: str, dead_letter_topic: str) -> Published:
    published = Published()
    for _key, value in read_topic(bootstrap_servers, output_topic):
        record = json.loads(value)
        published.counts[record["key"]].append((record["batch_id"], record["count"]))
    published.dead_letters = [json.loads(value) for _key, value in read_topic(bootstrap_servers, dead_letter_topic)]
    return published
