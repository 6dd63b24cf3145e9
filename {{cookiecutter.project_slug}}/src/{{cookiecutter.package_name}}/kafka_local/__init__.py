"""Where a test or the demo gets a real Kafka broker. This module owns the choice:

1. ``KAFKA_BOOTSTRAP_SERVERS`` is set: use that cluster;
2. a Docker engine answers: testcontainers starts Kafka (KRaft) in a container;
3. otherwise: a single-node broker from Apache Kafka's jars, resolved with Maven.

``KAFKA_PROVIDER`` (``env``, ``testcontainers``, ``process``) forces one branch, so CI
cannot fall back silently; ``auto`` (the default) tries them in the order above.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .containers import docker_engine_answers, kafka_container, wait_until_serving
from .errors import KafkaUnavailable
from .process import LocalKafkaBroker

PROVIDERS = ("auto", "env", "testcontainers", "process")

__all__ = ["KafkaHandle", "KafkaUnavailable", "LocalKafkaBroker", "PROVIDERS", "provide_kafka"]


@dataclass
class KafkaHandle:
    provider: str
    bootstrap_servers: str
    image: str | None = None
    container_id: str | None = None
    restart_broker: Callable[[], None] | None = None  # kill -9 and start again on the same data

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
        wait_until_serving(bootstrap, timeout=30)
        yield KafkaHandle("env", bootstrap)
        return
    if choice == "testcontainers" or (choice == "auto" and docker_engine_answers()):
        if not docker_engine_answers():
            raise KafkaUnavailable("KAFKA_PROVIDER=testcontainers, but no Docker engine answers.")
        with kafka_container() as (servers, container):
            yield KafkaHandle(
                "testcontainers", servers, image=container.image,
                container_id=container.get_wrapped_container().short_id,
            )
        return
    with tempfile.TemporaryDirectory(prefix="kafka-local-", dir=workdir) as scratch:
        broker = LocalKafkaBroker(Path(scratch))
        broker.start()

        def restart() -> None:
            broker.kill()
            broker.start()

        try:
            yield KafkaHandle("process", broker.bootstrap_servers, restart_broker=restart)
        finally:
            broker.stop()
