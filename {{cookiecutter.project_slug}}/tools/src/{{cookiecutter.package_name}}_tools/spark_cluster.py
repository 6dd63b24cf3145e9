"""A Spark standalone cluster on the loopback interface, for the cluster tests and the chaos
runner's `--cluster` mode: a master and workers started from the installed PySpark's own
classes (`spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`), as a team's
cluster runs them. The job reaches it through `deploy/spark-submit.sh` with
`SPARK_MASTER=<cluster.url>`.

    with SparkCluster(workdir, workers=2) as cluster:
        ... cluster.url ... cluster.kill_worker(0) ... cluster.start_worker(0) ...
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Hashable
from pathlib import Path

from .processes import descendants, free_port, kill_processes
from .starting import BOUND_SECONDS, StartFailed, tree_progress, wait_for_start


class ClusterUnavailable(RuntimeError):
    """The local cluster could not be started; the message says why."""


IVY_JARS = Path.home() / ".ivy2.5.2" / "jars"  # Spark 4's default Ivy cache (spark.jars.ivy)
# What hadoop-aws needs at run time besides Hadoop (its Ivy descriptor's compile and runtime dependencies).
S3A_DEPENDENCIES = ("software.amazon.awssdk_bundle-*.jar",
                    "software.amazon.s3.analyticsaccelerator_analyticsaccelerator-s3-*.jar",
                    "org.wildfly.openssl_wildfly-openssl-*.jar")


def s3a_classpath(ivy_jars: Path = IVY_JARS) -> str:
    """hadoop-aws and the AWS SDK bundle as a class path, from Ivy's cache, where the job's own
    resolution (`spark.jars.packages`) puts them; resolved that way first if missing. Every node
    of this cluster shares the machine, so spark-submit.sh need not ship the ~700 MB bundle to
    each executor of each submission (HADOOP_AWS_CLASSPATH)."""
    from {{ cookiecutter.package_name }}.storage.object_store import hadoop_aws_package

    package = hadoop_aws_package()
    version = package.rsplit(":", 1)[1]

    def found() -> list[Path] | None:
        """hadoop-aws and its runtime dependencies (its Ivy descriptor's compile and runtime ones)."""
        aws = ivy_jars / f"org.apache.hadoop_hadoop-aws-{version}.jar"
        jars = [aws] if aws.exists() else []
        for pattern in S3A_DEPENDENCIES:
            jars += sorted(ivy_jars.glob(pattern))[-1:]
        return jars if len(jars) == 1 + len(S3A_DEPENDENCIES) else None

    if found() is None:
        code = ("from {{ cookiecutter.package_name }}.spark.session import spark_session; "
                f"spark_session('resolve-s3a', 'local[1]', 1, packages=({package!r},)).stop()")
        subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, timeout=1800)
    jars = found()
    if jars is None:
        raise ClusterUnavailable(f"{package} and the AWS SDK bundle are not in {ivy_jars}, and resolving them failed")
    return ":".join(str(jar) for jar in jars)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkCluster:
    """A master and `workers` workers of `cores` cores and `memory` each, logs under `workdir`."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.workdir, self.cores, self.memory = workdir, cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = [None] * workers

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def __enter__(self) -> SparkCluster:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self, bound_seconds: float = BOUND_SECONDS) -> float:
        """Start the master and every worker; wait until all workers are registered and alive,
        while the processes live and make progress (starting.py). Returns the seconds it took."""
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(self.port), "--webui-port", str(self.ui_port))
        self._wait(lambda: self._state() is not None, "the Spark master", bound_seconds)
        for index in range(len(self.workers)):
            self.start_worker(index, wait=False)
        self._wait(lambda: self.alive_workers() == len(self.workers), f"{len(self.workers)} Spark workers",
                   bound_seconds)
        return time.monotonic() - started

    def start_worker(self, index: int, wait: bool = True, bound_seconds: float = BOUND_SECONDS) -> None:
        work = self.workdir / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        before = self.alive_workers() if wait else 0
        self.workers[index] = self._spawn(
            f"worker-{index}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
            "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
            "--webui-port", str(free_port()), self.url)
        if wait:
            self._wait(lambda: self.alive_workers() > before, f"Spark worker {index}", bound_seconds)

    def kill_worker(self, index: int) -> list[int]:
        """SIGKILL worker `index` and its executors (their JVMs are its children): a lost machine.
        Returns the pids killed."""
        process = self.workers[index]
        if process is None:
            return []
        below = descendants(process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        kill_processes(below)
        process.wait()
        self.workers[index] = None
        return [process.pid, *below]

    def applications(self) -> list[str]:
        """The names of the applications the master has run or runs."""
        state = self._state() or {}
        return [app.get("name", "") for key in ("activeapps", "completedapps") for app in state.get(key, [])]

    def alive_workers(self) -> int:
        state = self._state() or {}
        return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")

    def stop(self) -> None:
        for index in range(len(self.workers)):
            self.kill_worker(index)
        if self.master is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.master.pid, signal.SIGKILL)
            self.master.wait()
            self.master = None

    def _spawn(self, name: str, main_class: str, *arguments: str) -> subprocess.Popen:
        home = spark_home()
        environment = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOG_DIR": str(self.workdir),
                       "SPARK_NO_DAEMONIZE": "1"}
        with open(self.workdir / f"{name}.log", "ab") as log:
            return subprocess.Popen([str(home / "bin" / "spark-class"), main_class, *arguments], env=environment,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _state(self) -> dict | None:
        """The master's own view (its web UI's JSON), None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as response:
                return json.load(response)
        except (OSError, ValueError):
            return None

    def _wait(self, condition: Callable[[], bool], what: str, bound_seconds: float) -> None:
        """Until `condition`, while the master and the workers live and any of them makes progress;
        the cluster stopped, and ClusterUnavailable, if the master exits or all stall."""
        members = [process for process in (self.master, *self.workers) if process is not None]
        logs = sorted(self.workdir.glob("*.log"))

        def progress() -> Hashable:
            return tuple(tree_progress(process.pid)() for process in members), tuple(
                log.stat().st_size for log in logs if log.exists())

        try:
            wait_for_start(what, condition, alive=lambda: self.master is not None and self.master.poll() is None,
                           progress=progress, bound_seconds=bound_seconds)
        except StartFailed as error:
            self.stop()
            raise ClusterUnavailable(f"{error}; logs in {self.workdir}") from None
