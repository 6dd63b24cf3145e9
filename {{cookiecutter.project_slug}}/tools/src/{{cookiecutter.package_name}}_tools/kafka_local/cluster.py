"""A three-node Kafka cluster on loopback: each node a broker and a KRaft controller, a static
quorum of the three, internal and default topics with three replicas and `min.insync.replicas=2`,
as production clusters run. It is what the cluster fault tests kill nodes of: the leader of a
partition, a transaction's coordinator. Its nodes are processes from Kafka's jars (process.py),
or containers of the Kafka image (container_node.py), as KAFKA_PROVIDER picks for one broker."""

from __future__ import annotations

import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Literal

from confluent_kafka.admin import AdminClient

from ..processes import free_ports
from ..starting import BOUND_SECONDS
from .container_node import ContainerNode
from .containers import reap_orphans
from .engine import container_engine
from .image import ensure_kafka_image
from .process import PORTS_PER_NODE, TRANSACTION_LOG_PARTITIONS, LocalKafkaBroker, new_cluster_id
from .secured import make_certificates
from .unavailable import KafkaUnavailable

TRANSACTION_LOG = "__transaction_state"
Launcher = Literal["process", "container"]


class LocalKafkaCluster:
    """`brokers` nodes in `workdir`/node-<id>; `kill(node)` + `start_node(node)` is a hard crash
    and restart of one node on its data."""

    def __init__(self, workdir: Path, brokers: int = 3, heap: str = "384m", secured: bool = False,
                 launcher: Launcher = "process") -> None:
        """`secured`: each node also serves SASL_SSL and enforces ACLs (secured.py). `launcher`:
        "container" starts the nodes in containers, with the engine and the image of the
        testcontainers provider (engine.py, image.py)."""
        if brokers < 3:
            raise ValueError(f"a cluster has at least 3 nodes (for 3 replicas), not {brokers}")
        cluster_id = new_cluster_id()
        self.workdir = Path(workdir)
        self.launcher = launcher
        node_type = ContainerNode if launcher == "container" else LocalKafkaBroker
        ports = free_ports(PORTS_PER_NODE * brokers)  # all at once: no two listeners on one port
        self.nodes = {node_id: node_type(self.workdir / f"node-{node_id}", heap, node_id,
                                         ports[PORTS_PER_NODE * (node_id - 1):PORTS_PER_NODE * node_id])
                      for node_id in range(1, brokers + 1)}
        self._engine = ExitStack()  # the container engine, while container nodes run
        self.certificates = make_certificates(self.workdir / "tls") if secured else None
        for node in self.nodes.values():
            node.cluster_id, node.certificates = cluster_id, self.certificates
        self._turns = itertools.cycle(self.nodes)

    @property
    def voters(self) -> str:
        """The static controller quorum: every node, by its controller port."""
        return ",".join(f"{node_id}@127.0.0.1:{node.controller_port}" for node_id, node in self.nodes.items())

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(node.bootstrap_servers for node in self.nodes.values())

    @property
    def sasl_bootstrap_servers(self) -> str:
        return ",".join(node.sasl_bootstrap_servers for node in self.nodes.values())

    @property
    def secured_bootstrap_servers(self) -> str:
        """The SASL_SSL listeners (a secured cluster's)."""
        return ",".join(node.secured_bootstrap_servers for node in self.nodes.values())

    def start(self, bound_seconds: float = BOUND_SECONDS) -> float:
        """Start every node and wait until all serve, each while it lives and makes progress, up
        to `bound_seconds` (starting.py); returns the seconds it took, the container engine's
        start and the image's build included (which the nodes' waits do not count)."""
        started = time.monotonic()
        for node in self.nodes.values():  # the ports are settled now (kafka up reuses a cluster's)
            node.voters = self.voters
        try:
            if self.launcher == "container":
                self._start_engine()
            # Formatting (a JVM each) in parallel; then the nodes, which wait for their quorum.
            with ThreadPoolExecutor(len(self.nodes)) as pool:
                list(pool.map(lambda node: node.launch(), self.nodes.values()))
            for node in self.nodes.values():
                node.wait_until_serving(bound_seconds)
        except BaseException:
            self.stop()
            raise
        return time.monotonic() - started

    def _start_engine(self) -> None:
        """The container engine for the cluster's lifetime, the image, and what an earlier
        session killed in its tracks left behind removed."""
        import docker

        self._engine.enter_context(container_engine())
        image = ensure_kafka_image()
        client = docker.from_env()
        try:
            reap_orphans(client)
        finally:
            client.close()
        for node in self.nodes.values():
            if isinstance(node, ContainerNode):
                node.image = image

    def kill(self, node_id: int) -> None:
        """SIGKILL one node: a crash, not a shutdown."""
        self.nodes[node_id].kill()

    def hang(self, node_id: int) -> None:
        """One node stops answering without closing its connections (SIGSTOP, or the container
        paused): clients wait out their request time-outs instead of seeing a reset."""
        self.nodes[node_id].hang()

    def resume(self, node_id: int) -> None:
        self.nodes[node_id].resume()

    def start_node(self, node_id: int, bound_seconds: float = BOUND_SECONDS) -> float:
        """Start a node that was killed or stopped, on its data; returns the seconds it took."""
        return self.nodes[node_id].start(bound_seconds)

    def restart_next_node(self) -> None:
        """kill -9 of one node and its restart on its data, the next one at each call."""
        node_id = next(self._turns)
        self.kill(node_id)
        self.start_node(node_id)

    def stop(self) -> None:
        """Stop every node (and remove a container node with its data)."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(lambda node: node.close(), self.nodes.values()))
        self._engine.close()

    def leader(self, topic: str, partition: int, timeout: float = 10.0) -> int:
        """The node id leading `topic`'s `partition`, as the cluster's metadata says now."""
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        metadata = admin.list_topics(topic, timeout=timeout)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or partition not in found.partitions:
            raise KafkaUnavailable(f"no metadata for {topic}-{partition}: {found.error if found else 'no topic'}")
        leader = found.partitions[partition].leader
        if leader < 0:
            raise KafkaUnavailable(f"{topic}-{partition} has no leader")
        return leader

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The node id coordinating `transactional_id`'s transactions: the leader of its partition
        of the transaction log, which Kafka picks from the id's Java hash code."""
        return self.leader(TRANSACTION_LOG, transaction_log_partition(transactional_id))


def transaction_log_partition(transactional_id: str, partitions: int = TRANSACTION_LOG_PARTITIONS) -> int:
    """Kafka's TransactionStateManager.partitionFor: Utils.abs(id.hashCode()) % partitions."""
    units = transactional_id.encode("utf-16-be")  # Java's chars
    code = 0
    for at in range(0, len(units), 2):
        code = (31 * code + int.from_bytes(units[at:at + 2], "big")) & 0xFFFFFFFF
    signed = code - (1 << 32) if code >= 1 << 31 else code
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions
