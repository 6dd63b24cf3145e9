"""The Kafka cluster tests' fixture: a production-shaped Kafka, three brokers (each also a KRaft
controller) on the loopback interface, every topic with three replicas and
`min.insync.replicas=2` (the tools' kafka_local/cluster.py), started from Kafka's jars."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from {{ cookiecutter.package_name }}.errors import KafkaUnavailable
from {{ cookiecutter.package_name }}_tools.kafka_local.cluster import LocalKafkaCluster


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[LocalKafkaCluster]:
    cluster = LocalKafkaCluster(tmp_path_factory.mktemp("kafka-cluster"), secured=True)
    try:
        seconds = cluster.start()
    except KafkaUnavailable as error:
        pytest.fail(f"these tests need a three-broker Kafka cluster and none could be started: {error}",
                    pytrace=False)
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\nkafka: three-broker cluster at {cluster.bootstrap_servers}, up in {seconds:.1f}s", flush=True)
    yield cluster
    cluster.stop()
