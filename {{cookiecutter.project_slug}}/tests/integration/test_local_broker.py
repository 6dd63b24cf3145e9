"""The local-process launcher, whatever provider the session uses: a real broker from
Kafka's jars, usable for transactions, surviving a SIGKILL, and `kafka up` / `kafka down` of one
broker or of a three-broker cluster."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from {{ cookiecutter.package_name }}_tools.kafka_local import LocalKafkaBroker
from {{ cookiecutter.package_name }}_tools.readback import read_topic

pytestmark = pytest.mark.integration


def commit_one(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"local-{topic}"})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, value=value)
    producer.commit_transaction(60)


def test_the_process_broker_serves_transactions_and_survives_a_kill(tmp_path):
    broker = LocalKafkaBroker(tmp_path)
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
        commit_one(broker.bootstrap_servers, "t", b"before")
        broker.kill()
        broker.start()
        commit_one(broker.bootstrap_servers, "t", b"after")
        assert [value for _, value in read_topic(broker.bootstrap_servers, "t")] == [b"before", b"after"]
        assert "Kafka Server started" in broker.log_file.read_text()
    finally:
        broker.stop()


@pytest.mark.parametrize("brokers", [1, 3])
def test_kafka_up_and_down_commands(tmp_path, brokers):
    """`kafka up`: one broker, or three processes as one cluster (the cluster suite's nodes may be
    containers): every node serves, a topic has three replicas, a transaction commits."""
    workdir = tmp_path / "kafka"
    cli = [sys.executable, "-m", "{{ cookiecutter.package_name }}_tools", "kafka"]
    up = subprocess.run([*cli, "up", "--workdir", str(workdir), "--brokers", str(brokers)],
                        capture_output=True, text=True, timeout=180)
    try:
        assert up.returncode == 0, up.stderr
        bootstrap = json.loads((workdir / "broker.json").read_text())["bootstrap_servers"]
        what = "local broker" if brokers == 1 else f"local {brokers}-broker cluster"
        assert f"{what} ready at {bootstrap}" in up.stdout
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert len(admin.list_topics(timeout=30).brokers) == brokers
        if brokers > 1:
            admin.create_topics([NewTopic("t", 2)])["t"].result(30)  # the cluster's default replication
            commit_one(bootstrap, "t", b"replicated")  # once it commits, every broker knows the topic
            assert [value for _, value in read_topic(bootstrap, "t")] == [b"replicated"]
            assert {len(partition.replicas) for partition in admin.list_topics("t", timeout=30).topics["t"]
                    .partitions.values()} == {3}
    finally:
        down = subprocess.run([*cli, "down", "--workdir", str(workdir)], capture_output=True, text=True, timeout=60)
    assert "kafka: stopped" in down.stdout
