"""Kafka in a container, started by testcontainers when a Docker engine answers."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import KafkaUnavailable
from .process import free_port

KAFKA_IMAGE = os.environ.get("KAFKA_IMAGE", "apache/kafka:4.1.1")


def docker_engine_answers() -> bool:
    """True when a Docker-API engine (Docker, or Podman's API service) responds to a ping."""
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - any failure means "no usable engine"
        return False


def kafka_environment(port: int) -> dict[str, str]:
    """Single-node KRaft settings for the apache/kafka image (and the locally built one).

    The host port equals the container port, so the advertised listener is right on both sides.
    """
    return {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://0.0.0.0:{port},CONTROLLER://0.0.0.0:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
    }


def wait_until_serving(bootstrap: str, timeout: float) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=2)
            return
        except Exception as error:  # noqa: BLE001 - retried until the deadline
            last_error = error
            time.sleep(0.5)
    raise KafkaUnavailable(f"Kafka at {bootstrap} did not answer within {timeout:.0f}s: {last_error}")


@contextmanager
def kafka_container(image: str = KAFKA_IMAGE, timeout: float = 120.0) -> Iterator[tuple[str, object]]:
    """Yield (bootstrap servers, container) for a Kafka container; removed on exit."""
    from testcontainers.core.container import DockerContainer

    port = free_port()
    container = DockerContainer(image).with_bind_ports(port, port)
    for name, value in kafka_environment(port).items():
        container = container.with_env(name, value)
    with container:
        bootstrap = f"127.0.0.1:{port}"
        wait_until_serving(bootstrap, timeout)
        yield bootstrap, container
