"""The broker the tests run against supports what exactly-once needs: transactions
that commit or abort, and consumers that read only committed records."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from {{ cookiecutter.package_name }}_tools.readback import read_topic, wait_for_settled_transactions

pytestmark = pytest.mark.integration


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

    committed = [value for _key, value in read_topic(kafka.bootstrap_servers, topic, "read_committed")]
    everything = [value for _key, value in read_topic(kafka.bootstrap_servers, topic, "read_uncommitted")]

    assert sorted(committed) == sorted(f"committed-{i}".encode() for i in range(5))
    assert sorted(everything) == sorted(
        [f"committed-{i}".encode() for i in range(5)] + [f"aborted-{i}".encode() for i in range(3)]
    )


def test_a_read_waits_for_the_transactions_in_flight_and_not_forever(kafka, new_topic):
    """An open transaction keeps a partition unsettled (its records unreadable); the wait gives up
    after its time-out, and returns at once when the transaction commits."""
    topic = new_topic("settle", partitions=2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"open")
    producer.flush(30)

    assert not wait_for_settled_transactions(kafka.bootstrap_servers, topic, timeout=1.0)
    assert read_topic(kafka.bootstrap_servers, topic, settle=0) == []

    producer.commit_transaction(30)
    assert wait_for_settled_transactions(kafka.bootstrap_servers, topic, timeout=30.0)
    assert read_topic(kafka.bootstrap_servers, topic, settle=0) == [(b"k", b"open")]
