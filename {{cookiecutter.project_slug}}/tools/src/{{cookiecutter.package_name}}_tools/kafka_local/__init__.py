"""Where a test or the demo gets a real Kafka broker. This module owns the choice:

1. ``KAFKA_BOOTSTRAP_SERVERS`` is set: use that cluster;
2. a Docker engine answers: testcontainers starts Kafka (KRaft) in a container;
   with ``KAFKA_PROVIDER=testcontainers`` and no engine, Podman is installed and serves one
   (engine.py), and the image is built locally when it cannot be pulled (image.py);
3. otherwise: a single-node broker from Apache Kafka's jars, resolved with Maven.

A three-broker cluster (cluster.py) follows the same choice (`cluster_launcher`): its nodes are
containers where the provider is testcontainers, else processes from Kafka's jars; a given
cluster (``env``) cannot have its brokers killed, so the cluster tests start their own from the jars.

``KAFKA_PROVIDER`` (``env``, ``testcontainers``, ``process``) forces one branch, so CI
cannot fall back silently; ``auto`` (the default) tries them in the order above.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .cluster import Launcher, LocalKafkaCluster
from .containers import docker_engine_answers, kafka_container, wait_until_serving
from .engine import container_engine
from .image import ensure_kafka_image
from .process import LocalKafkaBroker
from .unavailable import KafkaUnavailable

PROVIDERS = ("auto", "env", "testcontainers", "process")

__all__ = ["PROVIDERS", "KafkaHandle", "KafkaUnavailable", "LocalKafkaBroker", "LocalKafkaCluster", "cluster_handle",
           "cluster_launcher", "provide_kafka", "provide_kafka_cluster"]


@dataclass
class KafkaHandle:
    provider: str
    bootstrap_servers: str
    image: str | None = None
    container_id: str | None = None
    restart_broker: Callable[[], None] | None = None  # kill -9 and start again on the same data
    sasl_bootstrap_servers: str | None = None  # the SASL_PLAINTEXT listener (sasl.py) of a broker we started
    cluster: LocalKafkaCluster | None = None  # a local cluster's nodes, for faults of one node in particular

    def describe(self) -> str:
        return (
            f"kafka: provider={self.provider} bootstrap={self.bootstrap_servers} "
            f"image={self.image or '-'} container={self.container_id or '-'}"
        )


def chosen_provider(explicit: str | None = None) -> str:
    choice = (explicit or os.environ.get("KAFKA_PROVIDER") or "auto").strip().lower()
    if choice not in PROVIDERS:
        raise KafkaUnavailable(f"KAFKA_PROVIDER={choice!r} is not one of {', '.join(PROVIDERS)}.")
    return choice


@contextmanager
def provide_kafka(workdir: Path | None = None, provider: str | None = None) -> Iterator[KafkaHandle]:
    """Yield a running Kafka for the duration of the block; stop what was started."""
    choice = chosen_provider(provider)
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if choice == "env" or (choice == "auto" and bootstrap):
        if not bootstrap:
            raise KafkaUnavailable("KAFKA_PROVIDER=env, but KAFKA_BOOTSTRAP_SERVERS is not set.")
        wait_until_serving(bootstrap, "KAFKA_BOOTSTRAP_SERVERS", bound_seconds=30)
        yield KafkaHandle("env", bootstrap)
        return
    if choice == "testcontainers" or (choice == "auto" and docker_engine_answers()):
        # Under auto an engine already answers, so container_engine() installs and starts nothing.
        with container_engine():
            image = ensure_kafka_image()
            started = time.monotonic()
            with kafka_container(image) as broker:
                print(f"kafka: container broker serving in {time.monotonic() - started:.1f}s")
                yield KafkaHandle(
                    "testcontainers", broker.bootstrap_servers, image=image,
                    container_id=broker.container_id, restart_broker=broker.restart,
                    sasl_bootstrap_servers=broker.sasl_bootstrap_servers,
                )
        return
    with tempfile.TemporaryDirectory(prefix="kafka-local-", dir=workdir) as scratch:
        local = LocalKafkaBroker(Path(scratch))
        local.start()

        def restart() -> None:
            local.kill()
            local.start()

        try:
            yield KafkaHandle("process", local.bootstrap_servers, restart_broker=restart,
                              sasl_bootstrap_servers=local.sasl_bootstrap_servers)
        finally:
            local.stop()


def cluster_launcher(provider: str | None = None) -> Launcher:
    """Where a local cluster's nodes run: containers for testcontainers (or auto with an engine
    answering and no KAFKA_BOOTSTRAP_SERVERS), else processes."""
    choice = chosen_provider(provider)
    if choice == "testcontainers" or (choice == "auto" and not os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
                                      and docker_engine_answers()):
        return "container"
    return "process"


def cluster_handle(cluster: LocalKafkaCluster) -> KafkaHandle:
    """A started cluster as a handle: its broker restart kills and restarts one node, each in turn."""
    provider = "testcontainers" if cluster.launcher == "container" else "process"
    return KafkaHandle(f"{provider} ({len(cluster.nodes)} brokers)", cluster.bootstrap_servers,
                       restart_broker=cluster.restart_next_node, sasl_bootstrap_servers=cluster.sasl_bootstrap_servers,
                       cluster=cluster)


@contextmanager
def provide_kafka_cluster(workdir: Path, brokers: int = 3, provider: str | None = None) -> Iterator[KafkaHandle]:
    """A local cluster of `brokers` nodes for the duration of the block, its nodes where
    `cluster_launcher(provider)` says."""
    cluster = LocalKafkaCluster(workdir, brokers, launcher=cluster_launcher(provider))
    cluster.start()
    try:
        yield cluster_handle(cluster)
    finally:
        cluster.stop()
