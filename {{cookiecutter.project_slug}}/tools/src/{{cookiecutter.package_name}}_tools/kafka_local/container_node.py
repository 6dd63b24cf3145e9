"""A node of the local cluster (cluster.py) in a container of the Kafka image (image.py) instead of
a process. The configuration is the process node's own (process.server_properties), given as the
image's KAFKA_* variables. The container runs on the host's network, so nodes and clients reach
every listener at 127.0.0.1 as they do with processes; its data lives in a volume of its own, so
`kill()` and `start()` are a crash and a restart on the same data; a secured cluster's
certificates are mounted read-only at the path the configuration names."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any

from ..starting import BOUND_SECONDS
from .containers import (
    DATA_DIR,
    container_progress,
    image_environment,
    owner_labels,
    remove_volume,
    wait_until_serving,
)
from .process import LocalKafkaBroker, jvm_options, server_properties
from .unavailable import KafkaUnavailable


class ContainerNode(LocalKafkaBroker):
    """`image` is set before the first `launch()` (the cluster ensures it once for all nodes)."""

    image: str | None = None
    _container: Any = None  # testcontainers' DockerContainer, once created
    _volume: str | None = None

    def environment(self) -> dict[str, str]:
        secured = None if self.certificates is None else (self.secured_port, self.certificates)
        properties = server_properties(Path(DATA_DIR), self.port, self.controller_port, self.sasl_port,
                                       self.node_id, self.voters, secured)
        return {**image_environment(properties), "CLUSTER_ID": self.cluster_id,
                "KAFKA_HEAP_OPTS": f"-Xmx{self.heap} -Xms128m", "KAFKA_OPTS": jvm_options()}

    def launch(self) -> None:
        """Create and start the container; a killed or stopped one starts again on its data."""
        if self._container is not None:
            self._container.get_wrapped_container().start()
            return
        import docker
        from testcontainers.core.container import DockerContainer

        if self.image is None:
            raise KafkaUnavailable("a container node needs its image (image.ensure_kafka_image)")
        labels = owner_labels()
        client = docker.from_env()
        try:
            self._volume = client.volumes.create(f"kafka-node-{uuid.uuid4().hex[:12]}", labels=labels).name
        finally:
            client.close()
        container = (DockerContainer(self.image)
                     .with_kwargs(labels=labels, network_mode="host")
                     .with_volume_mapping(self._volume, DATA_DIR, "rw"))
        if self.certificates is not None:
            directory = str(self.certificates.keystore.parent)
            container = container.with_volume_mapping(directory, directory, "ro")
        for name, value in self.environment().items():
            container = container.with_env(name, value)
        self._container = container.start()

    def wait_until_serving(self, bound_seconds: float = BOUND_SECONDS) -> None:
        assert self._container is not None, "launch() first"
        try:
            wait_until_serving(self.bootstrap_servers, f"Kafka node {self.node_id}", self.running,
                               container_progress(self._container.get_wrapped_container()), bound_seconds)
        except KafkaUnavailable as error:
            raise KafkaUnavailable(f"{error}\ncontainer {self.container_id}'s last output:\n{self._log_tail()}"
                                   ) from None

    @property
    def container_id(self) -> str:
        return self._container.get_wrapped_container().short_id if self._container is not None else "-"

    def running(self) -> bool:
        if self._container is None:
            return False
        wrapped = self._container.get_wrapped_container()
        wrapped.reload()
        return wrapped.status == "running"

    def _log_tail(self, lines: int = 30) -> str:
        if self._container is None:
            return "(no container)"
        output = self._container.get_wrapped_container().logs(tail=lines)
        return bytes(output).decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL the container's broker: a crash, not a shutdown."""
        if self.running():
            wrapped = self._container.get_wrapped_container()
            wrapped.kill()
            wrapped.wait(timeout=30)

    def hang(self) -> None:
        """The container frozen (the engine's pause): the broker stops answering, its sockets open."""
        if self.running():
            self._container.get_wrapped_container().pause()

    def resume(self) -> None:
        """Unfreeze the container; one that is not paused (resumed already) is left as it is."""
        if self._container is not None:
            wrapped = self._container.get_wrapped_container()
            wrapped.reload()
            if wrapped.status == "paused":
                wrapped.unpause()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM: the broker's controlled shutdown; SIGKILL after `timeout`."""
        if self.running():
            self._container.get_wrapped_container().stop(timeout=int(timeout))

    def close(self) -> None:
        """Stop, then remove the container and its data volume."""
        if self._container is not None:
            with contextlib.suppress(Exception):  # already gone: nothing left to remove
                self._container.stop()
            self._container = None
        if self._volume is not None:
            import docker

            client = docker.from_env()
            try:
                remove_volume(client, self._volume)
            finally:
                client.close()
            self._volume = None
