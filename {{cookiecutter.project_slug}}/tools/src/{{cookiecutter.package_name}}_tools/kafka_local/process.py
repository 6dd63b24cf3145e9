"""A real Apache Kafka broker (KRaft, broker + controller in one JVM), started from Kafka's own
jars, which Maven resolves once into a cache outside the repo: one on its own, or a node of a
cluster (cluster.py)."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from importlib import resources
from pathlib import Path

from .. import maven
from ..processes import free_ports
from ..starting import BOUND_SECONDS, StartFailed, tree_progress, wait_for_start
from . import sasl
from . import secured as listener_tls
from .secured import Certificates
from .unavailable import KafkaUnavailable

KAFKA_VERSION = "4.3.0"
TRANSACTION_LOG_PARTITIONS = 6
PORTS_PER_NODE = 4  # its listeners: PLAINTEXT, CONTROLLER, SASL_PLAINTEXT, SASL_SSL
_READY_LINE = "Kafka Server started"


def jvm_options() -> str:
    """KAFKA_OPTS, as Kafka's own scripts read it: JVM options for every broker started here,
    process or container (the tests give theirs C1 alone, as they give Spark's JVMs)."""
    return os.environ.get("KAFKA_OPTS", "").strip()


def _resource(name: str) -> bytes:
    return resources.files(__package__).joinpath(name).read_bytes()


def cache_root() -> Path:
    return maven.cache_root()


def _require(tool: str, package: str) -> str:
    return maven.require(tool, package, KafkaUnavailable, "the local Kafka broker")


def resolve_jars(log=print) -> Path:
    """A directory holding the broker's runtime jars, resolved with Maven once."""
    return maven.resolve_jars(_resource("pom.xml"), f"kafka-{KAFKA_VERSION}", KafkaUnavailable, log)


def server_properties(data_dir: Path, port: int, controller_port: int, sasl_port: int, node_id: int = 1,
                      voters: str | None = None, secured: tuple[int, Certificates] | None = None) -> str:
    """One node's configuration. `voters` (`id@host:port,...`): a node of a cluster with that
    static controller quorum, whose internal and default topics have three replicas, two of them
    in sync to accept a write; without, a broker on its own (a quorum of itself, one replica).
    `secured` (port, certificates): a SASL_SSL listener there and ACLs enforced (secured.py)."""
    replicas, in_sync = (3, 2) if voters else (1, 1)
    quorum = f"controller.quorum.voters={voters}" if voters else \
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}"
    served = f"PLAINTEXT://127.0.0.1:{port},{sasl.LISTENER}://127.0.0.1:{sasl_port}"
    protocols = f"CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,{sasl.LISTENER}:SASL_PLAINTEXT"
    if secured is not None:
        served += f",{listener_tls.LISTENER}://127.0.0.1:{secured[0]}"
        protocols += f",{listener_tls.LISTENER}:{listener_tls.LISTENER}"
    return "\n".join([
        "process.roles=broker,controller",
        f"node.id={node_id}",
        quorum,
        f"listeners={served},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners={served}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        f"listener.security.protocol.map={protocols}",
        *(f"{name}={value}" for name, value in sasl.broker_properties().items()),
        *(f"{name}={value}" for name, value in (listener_tls.broker_properties(secured[1]) if secured else {}).items()),
        f"log.dirs={data_dir}",
        "num.partitions=1",
        # Internal topics must fit the brokers there are (on one broker: a single replica, or
        # init_transactions and consumer groups wait forever).
        f"default.replication.factor={replicas}",
        f"min.insync.replicas={in_sync}",
        f"offsets.topic.replication.factor={replicas}",
        f"transaction.state.log.replication.factor={replicas}",
        f"transaction.state.log.min.isr={in_sync}",
        f"share.coordinator.state.topic.replication.factor={replicas}",
        f"share.coordinator.state.topic.min.isr={in_sync}",
        # Fewer coordinator partitions than Kafka's 50: created at the first transaction and the
        # first consumer group, with every replica on 3 nodes, 50 would take seconds each time.
        f"transaction.state.log.num.partitions={TRANSACTION_LOG_PARTITIONS}",
        "offsets.topic.num.partitions=6",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false",
        "",
    ])


class LocalKafkaBroker:
    """One broker process; `kill()` + `start()` is a hard crash and restart on the same data.
    `node_id` and `voters`: a node of a cluster (server_properties)."""

    def __init__(self, workdir: Path, heap: str = "512m", node_id: int = 1, ports: list[int] | None = None) -> None:
        """`ports`: PORTS_PER_NODE free ports (processes.free_ports), else picked here."""
        self.workdir = Path(workdir)
        self.heap = heap
        self.node_id = node_id
        self.voters: str | None = None
        self.port, self.controller_port, self.sasl_port, self.secured_port = ports or free_ports(PORTS_PER_NODE)
        self.certificates: Certificates | None = None  # given: a SASL_SSL listener, ACLs enforced (secured.py)
        self.cluster_id = new_cluster_id()
        self.process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def secured_bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.secured_port}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "logs" / "server.log"

    def _java(self, jars: Path, *args: str) -> list[str]:
        return [
            _require("java", "openjdk-17-jre-headless"),
            f"-Xmx{self.heap}", "-Xms128m", *jvm_options().split(),
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.yaml'}",
            f"-Dkafka.logs.dir={self.workdir / 'logs'}",
            "-cp", f"{jars}/*", *args,
        ]

    def _prepare(self, jars: Path) -> Path:
        data = self.workdir / "data"
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j2.yaml").write_bytes(_resource("log4j2.yaml"))
        config = self.workdir / "server.properties"
        secured = None if self.certificates is None else (self.secured_port, self.certificates)
        config.write_text(server_properties(data, self.port, self.controller_port, self.sasl_port,
                                            self.node_id, self.voters, secured))
        if not (data / "meta.properties").exists():
            # A cluster's nodes share one id and its static quorum; a broker alone is a quorum of itself.
            quorum = ["--standalone"] if self.voters is None else []
            result = subprocess.run(
                self._java(jars, "kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",
                           "-c", str(config), *quorum, "--ignore-formatted"),
                capture_output=True, text=True,
            )
            if result.returncode != 0:
                output = self.workdir / "format.log"
                output.write_text(result.stdout + result.stderr)
                raise KafkaUnavailable(f"formatting KRaft storage failed (its output: {output}):\n"
                                       f"{result.stdout}{result.stderr}")
        return config

    def start(self, bound_seconds: float = BOUND_SECONDS) -> float:
        """Start the broker and wait until it serves (starting.wait_for_start: while it lives and
        makes progress, up to `bound_seconds`); returns the seconds it took."""
        started = time.monotonic()
        self.launch()
        try:
            self.wait_until_serving(bound_seconds)
        except KafkaUnavailable:
            if not self._stale_quorum_state():
                raise
            # Seen after kill -9 of a node of the local cluster (Kafka 4.3): the node restarts
            # believing a leader for the current epoch that the quorum did not elect, and exits.
            # Without its quorum-state file it learns the quorum's leader from the other voters.
            (self.workdir / "data" / "__cluster_metadata-0" / "quorum-state").unlink(missing_ok=True)
            self.launch()
            self.wait_until_serving(bound_seconds)
        return time.monotonic() - started

    def _stale_quorum_state(self) -> bool:
        return self.voters is not None and "which is inconsistent with current leader" in self._log_tail(200)

    def launch(self) -> None:
        """Start the process without waiting: a cluster's nodes serve only once a quorum of them runs."""
        jars = resolve_jars()
        config = self._prepare(jars)
        self._log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with open(self.workdir / "logs" / "stdout.log", "ab") as stdout:
            self.process = subprocess.Popen(
                self._java(jars, "kafka.Kafka", str(config)),
                stdout=stdout, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def wait_until_serving(self, bound_seconds: float = BOUND_SECONDS) -> None:
        """Until the launched broker serves, while it lives and makes progress (starting.py);
        stopped, and KafkaUnavailable with the end of its log, if it exits, stalls or passes the bound."""
        assert self.process is not None, "launch() first"
        process = self.process
        what = "the local Kafka broker" if self.voters is None else f"Kafka node {self.node_id}"
        try:
            wait_for_start(what, lambda: self._log_has_ready_line(self._log_offset) and _accepts(self.port),
                           alive=lambda: process.poll() is None, bound_seconds=bound_seconds,
                           progress=tree_progress(process.pid, self.log_file, self.workdir / "logs" / "stdout.log"))
        except StartFailed as error:
            self.kill()
            code = "" if process.returncode is None else f" (exit code {process.returncode})"
            raise KafkaUnavailable(f"{error}{code}; its log is {self.log_file}:\n{self._log_tail()}") from None

    def _log_has_ready_line(self, offset: int) -> bool:
        if not self.log_file.exists():
            return False
        with open(self.log_file, "rb") as log:
            log.seek(offset)
            return _READY_LINE.encode() in log.read()

    def _log_tail(self, lines: int = 30) -> str:
        if not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL the broker: a crash, not a shutdown."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def hang(self) -> None:
        """SIGSTOP: the broker stops answering, its sockets open (a hung machine, not a crash)."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT; a broker that runs already is left as it is."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGCONT)

    def stop(self, timeout: float = 30.0) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


    def close(self) -> None:
        """Stop; the data stays in the work directory (a cluster's nodes are closed alike)."""
        self.stop()


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, not starting with "-"
    (which the storage tool would read as an option)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0
