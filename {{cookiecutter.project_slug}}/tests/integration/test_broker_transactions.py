"""The broker the tests run against supports what exactly-once needs: transactions
that commit or abort, and consumers that read only committed records."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer

pytestmark = pytest.mark.integration


def read_all(bootstrap: str, topic: str, isolation: str, expected: int, timeout: float = 20.0) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"check-{uuid.uuid4().hex}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": isolation,
    })
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        import time

        deadline = time.monotonic() + timeout
        # Read until the expected count plus a quiet second, so extra records would be seen.
        quiet_until = None
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                if len(values) >= expected:
                    quiet_until = quiet_until or time.monotonic() + 1.0
                    if time.monotonic() > quiet_until:
                        break
                continue
            if message.error():
                continue
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_read_committed_sees_only_committed_transactions(kafka, new_topic):
    topic = new_topic("tx", partitions=2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)

    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, key=str(i).encode(), value=f"committed-{i}".encode())
    producer.commit_transaction(30)

    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key=str(i).encode(), value=f"aborted-{i}".encode())
    producer.flush(30)
    producer.abort_transaction(30)

    committed = read_all(kafka.bootstrap_servers, topic, "read_committed", expected=5)
    everything = read_all(kafka.bootstrap_servers, topic, "read_uncommitted", expected=8)

    assert sorted(committed) == sorted(f"committed-{i}".encode() for i in range(5))
    assert sorted(everything) == sorted(
        [f"committed-{i}".encode() for i in range(5)] + [f"aborted-{i}".encode() for i in range(3)]
    )
