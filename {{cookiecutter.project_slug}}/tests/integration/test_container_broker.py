"""The broker the tests got is the one that was asked for, and committed transactions
survive a hard broker crash (SIGKILL of the process or of the container)."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import Producer

from {{ cookiecutter.package_name }}_tools.readback import read_topic

pytestmark = pytest.mark.integration


def test_the_provider_used_is_the_one_asked_for(kafka):
    wanted = os.environ.get("KAFKA_PROVIDER", "auto").strip().lower()
    if wanted != "auto":
        assert kafka.provider == wanted, kafka.describe()
    if kafka.provider == "testcontainers":
        assert kafka.image and kafka.container_id, kafka.describe()


def produce_transaction(producer: Producer, topic: str, values: list[str], commit: bool = True) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value.encode())
    if commit:
        producer.commit_transaction(60)
    else:
        producer.flush(30)
        producer.abort_transaction(60)


def test_committed_transactions_survive_a_broker_crash(kafka, new_topic):
    if kafka.restart_broker is None:
        pytest.skip(f"provider {kafka.provider} cannot restart its broker")
    topic = new_topic("crash", partitions=2)
    before = [f"before-{i}" for i in range(5)]
    after = [f"after-{i}" for i in range(5)]
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(60)
    produce_transaction(producer, topic, before)

    kafka.restart_broker()

    # The same producer carries on: its coordinator state was recovered from the broker's log.
    produce_transaction(producer, topic, after)
    produce_transaction(producer, topic, ["aborted-0", "aborted-1"], commit=False)
    producer.flush(30)

    seen = [value for _key, value in read_topic(kafka.bootstrap_servers, topic)]
    assert sorted(seen) == sorted(value.encode() for value in before + after)
