"""What a chaos run does to the job and its services: SIGKILLs of the driver's process group and
of a Spark Python worker, a kill -9 and restart of the broker, and with `--cluster` (a local Spark
standalone cluster with its checkpoint on a local S3 server) of a Spark worker and the S3 server."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..processes import command_line, cpu_ticks, descendants, kill_processes

WORKER_MARKERS = ("pyspark.daemon", "pyspark.worker")
SECRET_VARIABLE = "CHAOS_S3_SECRET"  # the S3 secret reaches the job through `${...}` in its settings
# Held while the broker restarts, and while a run creates its topics or reads its verdict: runs
# sharing a broker (in one process) must not see it vanish in the middle of those.
BROKER_LOCK = threading.RLock()


def kill_driver(process: subprocess.Popen, below: dict[int, tuple[int, int]]) -> None:
    """SIGKILL the driver's process group and every process below it (Spark's Python workers run
    in groups of their own, `below` remembers those seen earlier): a lost machine."""
    below = {**below, **descendants(process.pid)}
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    kill_processes(below)
    process.wait()


def python_workers(driver_pid: int) -> list[tuple[int, bool]]:
    """Spark's Python processes below the driver: (pid, forked worker?) A forked worker's parent
    is the daemon, whose command line it shares."""
    below = descendants(driver_pid)
    spark = {pid for pid in below if any(marker in command_line(pid) for marker in WORKER_MARKERS)}
    return [(pid, below[pid][0] in spark) for pid in sorted(spark)]


def busy_workers(driver_pid: int, interval: float = 0.3) -> tuple[list[int], list[int]]:
    """(forked workers that used CPU during `interval`, every forked worker or else the daemons)."""
    workers = python_workers(driver_pid)
    forked = [pid for pid, is_forked in workers if is_forked]
    before = {pid: cpu_ticks(pid) for pid in forked}
    time.sleep(interval)
    busy = [pid for pid in forked if (ticks := before[pid]) is not None and (cpu_ticks(pid) or 0) > ticks]
    return busy, forked or [pid for pid, _ in workers]


def kill_python_worker(driver_pid: int, rng: random.Random, patient: bool) -> str | None:
    """SIGKILL one Python worker, preferably one running a task (a worker idle in Spark's pool is
    simply replaced); None when there is none busy yet and `patient`."""
    busy, others = busy_workers(driver_pid)
    candidates = busy or ([] if patient else others)
    if not candidates:
        return None
    victim = rng.choice(candidates)
    description = command_line(victim)
    with contextlib.suppress(ProcessLookupError):
        os.kill(victim, signal.SIGKILL)
    return f"pid {victim}, {'busy' if busy else 'idle'}: {description[-50:]}"


def python_driver(process: subprocess.Popen, cluster: bool) -> int:
    """The process that stops the job cleanly on SIGTERM: the job's Python driver. Under
    spark-submit (--cluster) that is a child of spark-submit's JVM, which SIGTERM would kill."""
    if not cluster:
        return process.pid
    for pid in descendants(process.pid):
        if "deploy/main.py" in command_line(pid):
            return pid
    return process.pid


def restart_broker(kafka: Any) -> float | None:
    """kill -9 of the broker and a restart on the same data: the seconds it took, or None when the
    provider cannot restart a broker it did not start."""
    if kafka.restart_broker is None:
        return None
    started = time.monotonic()
    with BROKER_LOCK:
        kafka.restart_broker()
    return time.monotonic() - started


HUNG_SECONDS = 45  # a hung broker: past the clients' request time-out (30 s), within the sink's commit time-out


def cluster_fault(kind: str, cluster: Any, rng: random.Random, output_topic: str, transactional_id: str) -> str:
    """One of plan.CLUSTER_FAULTS on a local three-broker cluster (kafka_local.LocalKafkaCluster),
    done when this returns (the nodes serving again): what was done, in a few words."""
    from .plan import COORDINATOR, HANG, HANG_COORDINATOR, LEADER, ROLLING, TWO_NODES

    def target(find: Callable[[], int], what: str) -> tuple[int, str]:
        try:
            return find(), what
        except Exception:  # noqa: BLE001 - no metadata while the cluster settles: any node will do
            return rng.choice(sorted(cluster.nodes)), f"a random node ({what} unknown)"

    started = time.monotonic()
    with BROKER_LOCK:
        if kind in (LEADER, COORDINATOR):
            node, what = (target(lambda: cluster.leader(output_topic, 0), "the leader of output partition 0")
                          if kind == LEADER else
                          target(lambda: cluster.transaction_coordinator(transactional_id), "the sink's coordinator"))
            cluster.kill(node)
            cluster.start_node(node)
            done = f"kill -9 of node {node}, {what}, and its restart"
        elif kind == TWO_NODES:
            nodes = rng.sample(sorted(cluster.nodes), 2)
            for node in nodes:
                cluster.kill(node)
            time.sleep(10)
            with ThreadPoolExecutor(2) as pool:  # together: each waits for a quorum
                list(pool.map(cluster.start_node, nodes))
            done = f"kill -9 of nodes {nodes}, 10s down, and their restart"
        elif kind == ROLLING:
            for node_id, node in sorted(cluster.nodes.items()):
                node.stop()
                cluster.start_node(node_id)
            done = "a rolling restart (SIGTERM, start) of every node"
        else:
            assert kind in (HANG, HANG_COORDINATOR), kind
            node, what = (target(lambda: cluster.transaction_coordinator(transactional_id), "the sink's coordinator")
                          if kind == HANG_COORDINATOR else (rng.choice(sorted(cluster.nodes)), "a random node"))
            cluster.hang(node)
            try:
                time.sleep(HUNG_SECONDS)
            finally:
                cluster.resume(node)
            done = f"node {node}, {what}, hung (SIGSTOP) for {HUNG_SECONDS}s"
    return f"{done}, in {time.monotonic() - started:.1f}s"


@dataclass
class ClusterSetup:
    """--cluster: the Spark standalone cluster, the S3 server and the bucket of the checkpoint."""

    spark: Any  # spark_cluster.SparkCluster
    s3: Any  # s3_local.S3Server
    bucket: str
    submit_script: Path
    s3a_classpath: str  # S3A's jars from the local Ivy cache: not shipped with every submission

    @classmethod
    @contextlib.contextmanager
    def started(cls, workdir: Path, say: Callable[[str], None]) -> Iterator[ClusterSetup]:
        """A cluster and an S3 server of the run's own, stopped after it."""
        from ..s3_local import S3Server
        from ..spark_cluster import SparkCluster

        cls.submit_script_or_exit()
        s3 = S3Server(workdir / "s3")
        say(f"cluster: S3Proxy at {s3.endpoint}, up in {s3.start():.1f}s")
        try:
            spark = SparkCluster(workdir / "spark-cluster", workers=2)
            say(f"cluster: Spark standalone at {spark.url} (a master and 2 workers), up in {spark.start():.1f}s")
            try:
                yield cls.on(spark, s3)
            finally:
                spark.stop()
        finally:
            s3.stop()

    @classmethod
    def on(cls, spark: Any, s3: Any) -> ClusterSetup:
        """The run on a running cluster and S3 server (the tests' own), in a bucket of its own.
        The run kills and restarts a worker and the S3 server: both must be the tools' own
        (SparkCluster, S3Server), started by this process."""
        from ..spark_cluster import s3a_classpath

        bucket = f"chaos-{uuid.uuid4().hex[:12]}"
        s3.client().create_bucket(Bucket=bucket)
        setup = cls(spark, s3, bucket, cls.submit_script_or_exit(), s3a_classpath())
        from {{ cookiecutter.package_name }}.storage import object_store

        object_store.use_in_this_process(setup.s3_settings(secret=s3.secret_key))  # reads the checkpoint
        return setup

    @staticmethod
    def submit_script_or_exit() -> Path:
        script = Path(__file__).resolve().parents[4] / "deploy" / "spark-submit.sh"
        if not script.exists():
            raise SystemExit(f"chaos --cluster submits the job with {script}, which is missing: run it from the "
                             "project (an editable install) rendered with the deployment files")
        return script

    def s3_settings(self, secret: str) -> dict[str, str]:
        return {"endpoint": self.s3.endpoint, "region": self.s3.region, "access_key_id": self.s3.access_key,
                "secret_access_key": secret, "path_style_access": "true"}

    def submission(self, checkpoint_location: str, python: str) -> tuple[list[str], dict[str, str]]:
        """How a run is started on the cluster: the launcher and its environment."""
        return ["bash", str(self.submit_script)], {
            "SPARK_MASTER": self.spark.url, "CHECKPOINT_LOCATION": checkpoint_location, "PYTHON": python,
            SECRET_VARIABLE: self.s3.secret_key, "HADOOP_AWS_CLASSPATH": self.s3a_classpath}

    def restart_s3(self) -> float:
        """kill -9 of the S3 server, a few seconds down, then up again on the same port and data."""
        self.s3.stop()
        time.sleep(3)
        return self.s3.start()

    def kill_spark_worker(self, rng: random.Random) -> tuple[int, Any]:
        """SIGKILL of one Spark worker and its executor JVM, then the worker started again a few
        seconds later: (its index, the pids killed)."""
        index = rng.randrange(len(self.spark.workers))
        killed = self.spark.kill_worker(index)
        time.sleep(3)
        self.spark.start_worker(index)
        return index, killed
