"""A real single-node Apache Kafka broker (KRaft, broker + controller in one JVM),
started from Kafka's own jars, which Maven resolves once into a cache outside the repo."""

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

from {{ cookiecutter.package_name }}.errors import KafkaUnavailable

from .. import maven
from ..processes import free_port
from . import sasl

KAFKA_VERSION = "4.3.0"
_READY_LINE = "Kafka Server started"


def _resource(name: str) -> bytes:
    return resources.files(__package__).joinpath(name).read_bytes()


def cache_root() -> Path:
    return maven.cache_root()


def _require(tool: str, package: str) -> str:
    return maven.require(tool, package, KafkaUnavailable, "the local Kafka broker")


def resolve_jars(log=print) -> Path:
    """A directory holding the broker's runtime jars, resolved with Maven once."""
    return maven.resolve_jars(_resource("pom.xml"), f"kafka-{KAFKA_VERSION}", KafkaUnavailable, log)


def server_properties(data_dir: Path, port: int, controller_port: int, sasl_port: int) -> str:
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port},"
        f"{sasl.LISTENER}://127.0.0.1:{sasl_port}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port},{sasl.LISTENER}://127.0.0.1:{sasl_port}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        f"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,{sasl.LISTENER}:SASL_PLAINTEXT",
        *(f"{name}={value}" for name, value in sasl.broker_properties().items()),
        f"log.dirs={data_dir}",
        "num.partitions=1",
        # One broker: internal topics must accept a single replica, or
        # init_transactions and consumer groups wait forever.
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=false",
        "",
    ])


class LocalKafkaBroker:
    """One broker process; `kill()` + `start()` is a hard crash and restart on the same data."""

    def __init__(self, workdir: Path, heap: str = "512m") -> None:
        self.workdir = Path(workdir)
        self.heap = heap
        self.port = free_port()
        self.controller_port = free_port()
        self.sasl_port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def log_file(self) -> Path:
        return self.workdir / "logs" / "server.log"

    def _java(self, jars: Path, *args: str) -> list[str]:
        return [
            _require("java", "openjdk-17-jre-headless"),
            f"-Xmx{self.heap}", "-Xms128m",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.yaml'}",
            f"-Dkafka.logs.dir={self.workdir / 'logs'}",
            "-cp", f"{jars}/*", *args,
        ]

    def _prepare(self, jars: Path) -> Path:
        data = self.workdir / "data"
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        (self.workdir / "log4j2.yaml").write_bytes(_resource("log4j2.yaml"))
        config = self.workdir / "server.properties"
        config.write_text(server_properties(data, self.port, self.controller_port, self.sasl_port))
        if not (data / "meta.properties").exists():
            result = subprocess.run(
                self._java(jars, "kafka.tools.StorageTool", "format", f"--cluster-id={_new_cluster_id()}",
                           "-c", str(config), "--standalone", "--ignore-formatted"),
                capture_output=True, text=True,
            )
            if result.returncode != 0:
                output = self.workdir / "format.log"
                output.write_text(result.stdout + result.stderr)
                raise KafkaUnavailable(f"formatting KRaft storage failed (its output: {output}):\n"
                                       f"{result.stdout}{result.stderr}")
        return config

    def start(self, timeout: float = 90.0) -> float:
        """Start the broker and wait until it serves; returns the seconds it took."""
        jars = resolve_jars()
        config = self._prepare(jars)
        started = time.monotonic()
        offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with open(self.workdir / "logs" / "stdout.log", "ab") as stdout:
            self.process = subprocess.Popen(
                self._java(jars, "kafka.Kafka", str(config)),
                stdout=stdout, stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise KafkaUnavailable(
                    f"the local Kafka broker exited with code {self.process.returncode} while "
                    f"starting; its log is {self.log_file}:\n{self._log_tail()}"
                )
            if self._log_has_ready_line(offset) and _accepts(self.port):
                return time.monotonic() - started
            time.sleep(0.2)
        self.kill()
        raise KafkaUnavailable(f"the local Kafka broker was not ready after {timeout:.0f}s; log {self.log_file}")

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

    def stop(self, timeout: float = 30.0) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def _new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0
