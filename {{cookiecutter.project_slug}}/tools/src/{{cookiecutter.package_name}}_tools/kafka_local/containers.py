"""Kafka in a container, started by testcontainers when a Docker engine answers
(engine.py provides one with Podman; image.py provides the image)."""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..processes import free_ports
from ..starting import BOUND_SECONDS, StartFailed, tree_progress, wait_for_start
from . import sasl
from .process import jvm_options, new_cluster_id
from .unavailable import KafkaUnavailable

DATA_DIR = "/var/lib/kafka/data"  # a volume in apache/kafka, owned by its non-root user
OWNER_LABEL = "kafka-local.owner"  # "<host>:<pid>" of the session that started the container


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


def kafka_environment(port: int, sasl_port: int) -> dict[str, str]:
    """Single-node KRaft settings for the apache/kafka image (and the locally built one).

    The host ports equal the container ports, so the advertised listeners are right on both sides.
    """
    listener = sasl.LISTENER
    return {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://0.0.0.0:{port},CONTROLLER://0.0.0.0:9093,{listener}://0.0.0.0:{sasl_port}",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port},{listener}://127.0.0.1:{sasl_port}",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":
            f"CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,{listener}:SASL_PLAINTEXT",
        **image_environment(sasl.broker_properties()),
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_LOG_DIRS": DATA_DIR,
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
    }


def image_environment(properties: Mapping[str, str] | str) -> dict[str, str]:
    """Broker properties (a mapping, or a properties file's text) as the image's variables:
    KAFKA_ and the name in capitals, "." as "_", "_" as "__", "-" as "___" (image/entrypoint.sh)."""
    if isinstance(properties, str):
        properties = dict(line.split("=", 1) for line in properties.splitlines() if "=" in line)
    return {"KAFKA_" + name.upper().replace("_", "__").replace(".", "_").replace("-", "___"): value
            for name, value in properties.items()}


def owner_labels() -> dict[str, str]:
    """The label that lets a later session remove what this one left behind (reap_orphans)."""
    return {OWNER_LABEL: f"{socket.gethostname()}:{os.getpid()}"}


def wait_until_serving(bootstrap: str, what: str, alive: Callable[[], bool] | None = None,
                       progress: Callable[[], Hashable] | None = None, bound_seconds: float = BOUND_SECONDS) -> None:
    """Wait until Kafka at `bootstrap` answers, while `alive` and making `progress` (starting.py);
    KafkaUnavailable, naming `what` and the client's last error, once it exits, stalls or passes the
    bound. Without `alive` and `progress` (a broker started elsewhere), only the bound ends the wait."""
    from confluent_kafka.admin import AdminClient

    # Quiet (critical only): "connection refused" is expected while the broker starts.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    last_error = ""

    def answers() -> bool:
        nonlocal last_error
        try:
            admin.list_topics(timeout=2)
            return True
        except Exception as error:  # noqa: BLE001 - asked again until the wait ends
            # Keep the text only: the exception's traceback would keep the client alive (and
            # retrying in the background) after this function returns.
            last_error = str(error)
            return False

    try:
        wait_for_start(f"{what} (Kafka at {bootstrap})", answers, alive=alive or (lambda: True),
                       progress=progress or time.monotonic, bound_seconds=bound_seconds)
    except StartFailed as error:
        raise KafkaUnavailable(f"{error}: {last_error}") from None


def container_progress(container: Any) -> Callable[[], Hashable]:
    """A sign of progress for a container (docker-py's Container): the CPU time of its processes
    (its main process's tree, on this host's kernel) and the length of its output."""

    def progress() -> Hashable:
        container.reload()
        pid = container.attrs.get("State", {}).get("Pid") or None
        return tree_progress(pid)(), len(container.logs(tail=200))

    return progress


class KafkaContainer:
    """A started Kafka container whose data lives in a named volume, so it survives a kill."""

    def __init__(self, container: Any, bootstrap: str, sasl_bootstrap: str, bound_seconds: float) -> None:
        self.container = container  # testcontainers' DockerContainer
        self.bootstrap_servers = bootstrap
        self.sasl_bootstrap_servers = sasl_bootstrap
        self.bound_seconds = bound_seconds

    @property
    def container_id(self) -> str:
        return self.container.get_wrapped_container().short_id

    def restart(self) -> None:
        """SIGKILL the container (a crash, not a shutdown), start it again, wait until it serves.

        The same container keeps its port binding and its data volume.
        """
        wrapped = self.container.get_wrapped_container()
        wrapped.kill()  # SIGKILL by default
        wrapped.wait(timeout=30)
        wrapped.start()
        wait_until_serving(self.bootstrap_servers, "the Kafka container", self.running, container_progress(wrapped),
                           self.bound_seconds)

    def running(self) -> bool:
        wrapped = self.container.get_wrapped_container()
        wrapped.reload()
        return wrapped.status == "running"


@contextmanager
def kafka_container(image: str, bound_seconds: float = BOUND_SECONDS) -> Iterator[KafkaContainer]:
    """Yield a serving Kafka container; the container and its data volume are removed on exit."""
    import docker
    from testcontainers.core.container import DockerContainer

    client = docker.from_env()
    labels = owner_labels()
    reap_orphans(client)
    port, sasl_port = free_ports(2)
    volume = client.volumes.create(f"kafka-data-{uuid.uuid4().hex[:12]}", labels=labels).name
    container = (
        DockerContainer(image)
        .with_kwargs(labels=labels)
        .with_bind_ports(port, port)
        .with_bind_ports(sasl_port, sasl_port)
        .with_volume_mapping(volume, DATA_DIR, "rw")
        .with_env("CLUSTER_ID", new_cluster_id())
        .with_env("KAFKA_OPTS", jvm_options())
    )
    for name, value in kafka_environment(port, sasl_port).items():
        container = container.with_env(name, value)
    try:
        with container:
            started = KafkaContainer(container, f"127.0.0.1:{port}", f"127.0.0.1:{sasl_port}", bound_seconds)
            try:
                wait_until_serving(started.bootstrap_servers, "the Kafka container", started.running,
                                   container_progress(container.get_wrapped_container()), bound_seconds)
            except KafkaUnavailable as error:
                logs = b"".join(container.get_logs()).decode(errors="replace")
                raise KafkaUnavailable(f"{error}\nlast container output:\n{logs[-3000:]}") from None
            yield started
    finally:
        remove_volume(client, volume)
        client.close()


def remove_volume(client: Any, name: str) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        client.volumes.get(name).remove(force=True)


def reap_orphans(client: Any) -> None:
    """Remove containers and volumes of sessions on this host that died without cleaning up
    (a CI timeout's SIGKILL, say): Ryuk, testcontainers' reaper, cannot run without a registry."""
    import docker.errors

    def orphaned(labels: dict[str, str] | None) -> bool:
        host, _, pid = (labels or {}).get(OWNER_LABEL, "").rpartition(":")
        if host != socket.gethostname() or not pid.isdigit():
            return False
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False

    for container in client.containers.list(all=True, filters={"label": OWNER_LABEL}):
        if orphaned(container.labels):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
    for volume in client.volumes.list(filters={"label": OWNER_LABEL}):
        if orphaned(volume.attrs.get("Labels")):
            remove_volume(client, volume.name)
