"""`chaos`: disrupt the job for real while it processes a known input, then check what a
read_committed consumer sees against that input, with a verifier that shares nothing with
the job but the topic names.

Disruptions, at moments drawn from `--seed` (printed first):
  - SIGKILL of the driver's process group (and its Python workers): a lost machine;
  - every fault-injection point of the sink (sink/faults.py), each a driver kill at a
    named step of the commit protocol, armed a few batches ahead of the last committed one;
  - SIGKILL of one Spark Python worker alone, when the job runs any (the at-least-once
    sink's tasks, the TTL count): the runner restarts the query in-process;
  - kill -9 of the Kafka broker and a restart on the same data.
With `--cluster`, the job runs on a local Spark standalone cluster (a master and two workers,
spark_cluster.py), submitted by deploy/spark-submit.sh, its checkpoint on a local S3 server
(s3_local); a worker kill is then a SIGKILL of a Spark worker and its executor (Spark runs the
lost tasks elsewhere; the worker comes back), and the S3 server is killed and restarted too.
The input (skewed keys, a share of malformed records) is produced in chunks while the job
runs. After each kill the job is started again from its checkpoint, until every input
record is in a committed batch. The seed reproduces the plan (order, batches, which run
loses what); the exact interleaving still depends on timing.

The last line printed is machine-readable:
  chaos: seed=S guarantee=G records=N kills=K broker_restarts=B faults=F lost=L duplicated=D dead_letter_ok=...

Imported by cli.py to build its parser: nothing heavy (pyspark, Kafka clients) at the top.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .kafka_io import create_topics, produce
from .processes import command_line, cpu_ticks, descendants, kill_processes, start_job

GUARANTEES = ("exactly-once", "at-least-once")
# The last line of a run, for machines (the tests read it).
VERDICT_LINE = re.compile(
    r"^chaos: seed=(?P<seed>\d+) guarantee=(?P<guarantee>[a-z-]+) records=(?P<records>\d+) kills=(?P<kills>\d+) "
    r"broker_restarts=(?P<broker_restarts>\d+) faults=(?P<faults>\d+) lost=(?P<lost>\d+) "
    r"duplicated=(?P<duplicated>\d+) dead_letter_ok=(?P<dead_letter_ok>true|false)$"
)
EXCLUDED_KEY = "orange"  # the run's own filter drops it, whatever the configured one
WORKER_MARKERS = ("pyspark.daemon", "pyspark.worker")
KILL = "kill"  # a run that ends with an external SIGKILL of the driver's process group
WORKER, BROKER, S3 = "worker", "broker", "s3"  # disruptions inside a run
QUIET = {"log_level": 2}  # librdkafka: no connection-refused lines while the broker restarts
# Held while the broker restarts, and while a run creates its topics or reads its verdict: runs
# sharing a broker (in one process) must not see it vanish in the middle of those.
BROKER_LOCK = threading.RLock()


@dataclass(frozen=True)
class Profile:
    events: int
    partitions: int
    keys: int  # distinct keys, skewed: the first ones are far more frequent
    malformed_rate: float
    max_offsets_per_trigger: int  # small, so that the input takes many batches ...
    drain_records_per_trigger: int  # ... but the final clean run drains what is left in a few
    chunks: int  # the input is produced in this many chunks ...
    chunk_interval: float  # ... this many seconds apart, while the job runs
    fault_rounds: int  # every fault point fires this many times (each one a driver kill)
    external_kills: int  # SIGKILLs of the driver's process group at random moments, besides the faults
    worker_kills: int
    broker_restarts: int
    s3_restarts: int  # --cluster only: kill -9 of the S3 server and a restart on the same data
    run_timeout: float  # a run that neither finishes nor dies in this time is killed
    deadline: float  # the whole run, start-up and verification included


PROFILES = {
    # Every job start costs 20-40 s of Spark start-up: the five fault runs are the driver kills,
    # the worker kill and the broker restart happen inside them, then one clean run drains the rest.
    "quick": Profile(events=20_000, partitions=4, keys=60, malformed_rate=0.01, max_offsets_per_trigger=500,
                     drain_records_per_trigger=10_000,
                     chunks=10, chunk_interval=6.0, fault_rounds=1, external_kills=0, worker_kills=1,
                     broker_restarts=1, s3_restarts=1, run_timeout=600, deadline=2400),
    "long": Profile(events=200_000, partitions=8, keys=400, malformed_rate=0.01, max_offsets_per_trigger=2000,
                    drain_records_per_trigger=40_000,
                    chunks=50, chunk_interval=4.0, fault_rounds=2, external_kills=6, worker_kills=4,
                    broker_restarts=2, s3_restarts=2, run_timeout=900, deadline=7200),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                        help="quick: 20,000 events, every fault point once (minutes); "
                             "long: 200,000 events over 8 partitions, more kills")
    parser.add_argument("--guarantee", choices=GUARANTEES, default="exactly-once",
                        help="the sink's delivery guarantee under test")
    parser.add_argument("--seed", type=int, help="seed of every random choice (default: a random one, printed)")
    parser.add_argument("--workdir", help="checkpoint, job logs and broker data (default: a new temporary directory)")
    parser.add_argument("--kafka-provider", choices=("auto", "env", "testcontainers", "process"),
                        help="where the broker comes from (default: $KAFKA_PROVIDER, else auto); "
                             "broker restarts need testcontainers or process")
    parser.add_argument("--cluster", action="store_true",
                        help="run the job on a local Spark standalone cluster through deploy/spark-submit.sh, "
                             "its checkpoint on a local S3 server; also kill Spark workers and the S3 server")


def run(args: argparse.Namespace, kafka: Any = None, out: TextIO | None = None) -> int:
    """Run the chaos profile; `kafka` is a KafkaHandle to use (the tests pass theirs), else one
    is provided for the duration of the run. Progress and the verdict go to `out` (stdout).
    Several runs may share a broker and a process (the tests run both guarantees side by side):
    a broker restart then never overlaps another run's topic creation or verification."""
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="chaos-"))
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    say = Reporter(out or sys.stdout)
    say(f"seed={seed} profile={args.profile} guarantee={args.guarantee} workdir={workdir}"
        + (" cluster=standalone+s3" if getattr(args, "cluster", False) else ""))
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(ClusterSetup.started(workdir, say)) if getattr(args, "cluster", False) else None
        if kafka is None:
            from .kafka_local import provide_kafka

            broker_dir = workdir / "kafka"
            broker_dir.mkdir(exist_ok=True)
            kafka = stack.enter_context(provide_kafka(broker_dir, provider=args.kafka_provider))
            say(kafka.describe())
        return Chaos(kafka, PROFILES[args.profile], args.guarantee, seed, workdir, say, cluster).run()


SECRET_VARIABLE = "CHAOS_S3_SECRET"  # the S3 secret reaches the job through `${...}` in its settings


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
    def started(cls, workdir: Path, say: Reporter):
        from .s3_local import S3Server
        from .spark_cluster import SparkCluster, s3a_classpath

        script = Path(__file__).resolve().parents[3] / "deploy" / "spark-submit.sh"
        if not script.exists():
            raise SystemExit(f"chaos --cluster submits the job with {script}, which is missing: run it from the "
                             "project (an editable install) rendered with the deployment files")
        s3 = S3Server(workdir / "s3")
        say(f"cluster: S3Proxy at {s3.endpoint}, up in {s3.start():.1f}s")
        try:
            spark = SparkCluster(workdir / "spark-cluster", workers=2)
            say(f"cluster: Spark standalone at {spark.url} (a master and 2 workers), up in {spark.start():.1f}s")
            try:
                bucket = f"chaos-{uuid.uuid4().hex[:12]}"
                s3.client().create_bucket(Bucket=bucket)
                setup = cls(spark, s3, bucket, script, s3a_classpath())
                from {{ cookiecutter.package_name }} import object_store

                object_store.use_in_this_process(setup.s3_settings(secret=s3.secret_key))  # reads the checkpoint
                yield setup
            finally:
                spark.stop()
        finally:
            s3.stop()

    def s3_settings(self, secret: str) -> dict[str, str]:
        return {"endpoint": self.s3.endpoint, "region": self.s3.region, "access_key_id": self.s3.access_key,
                "secret_access_key": secret, "path_style_access": "true"}

    def restart_s3(self) -> float:
        """kill -9 of the S3 server, a few seconds down, then up again on the same port and data."""
        self.s3.stop()
        time.sleep(3)
        return self.s3.start()


def _faults():
    """sink/faults.py, imported only when used: importing the sink package imports pyspark."""
    from {{ cookiecutter.package_name }}.sink import faults

    return faults


class Reporter:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __call__(self, message: str) -> None:
        self.line(f"chaos: [{self.elapsed():7.1f}s] {message}")

    def line(self, text: str) -> None:
        print(text, file=self.out, flush=True)


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
    busy = [pid for pid in forked if before[pid] is not None and (cpu_ticks(pid) or 0) > before[pid]]
    return busy, forked or [pid for pid, _ in workers]


# -- the input ----------------------------------------------------------------------------

class InputProducer(threading.Thread):
    """Produces the input in chunks, a few seconds apart, while the job runs. Idempotent and
    patient (a broker restart only delays it); the verifier reads back what the topic holds."""

    def __init__(self, bootstrap_servers: str, topic: str, values: list[bytes], partitions: int,
                 chunks: int, interval: float, say: Reporter) -> None:
        super().__init__(name="chaos-input", daemon=True)
        self.bootstrap_servers, self.topic, self.values = bootstrap_servers, topic, values
        self.partitions, self.chunks, self.interval, self.say = partitions, chunks, interval, say
        self.produced = 0
        self.errors: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({
            "bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True, "linger.ms": 20,
            "message.timeout.ms": 900_000, **QUIET,
        })

        def on_delivery(error, _message) -> None:
            if error is not None:
                self.errors.append(str(error))

        try:
            size = -(-len(self.values) // self.chunks)
            for chunk, start in enumerate(range(0, len(self.values), size)):
                if chunk:
                    time.sleep(self.interval)
                for i in range(start, min(start + size, len(self.values))):
                    produce(producer, self.topic, self.values[i], partition=i % self.partitions,
                            on_delivery=on_delivery)
                while producer.flush(5.0):
                    pass  # the broker may be restarting: the idempotent producer retries
                self.produced = min(start + size, len(self.values))
            self.say(f"input: all {self.produced} records produced to {self.topic}"
                     + (f" ({len(self.errors)} delivery errors: {self.errors[:2]})" if self.errors else ""))
        except Exception as error:  # noqa: BLE001 - reported; the verifier reads what the topic holds
            self.errors.append(repr(error))
            self.say(f"input: producer failed: {error!r}")
        finally:
            self.done.set()


# -- the plan -----------------------------------------------------------------------------

@dataclass
class RunPlan:
    end: str | None  # a fault point, KILL, or None: run until the input is drained
    fault_ahead: int = 1  # the fault fires at the first batch >= last committed + this
    kill_after_batches: int = 0  # KILL: once this run committed this many batches ...
    kill_delay: float = 0.0  # ... and this many seconds later (from the start when 0 batches)
    disruptions: list[tuple[str, float]] = field(default_factory=list)  # (kind, seconds after a commit)
    attempt: int = 1

    def describe(self) -> str:
        if self.end is None:
            what = "clean run until the input is drained"
        elif self.end == KILL:
            what = (f"SIGKILL of the driver {self.kill_delay:.1f}s after "
                    + (f"{self.kill_after_batches} batches" if self.kill_after_batches else "start"))
        else:
            what = f"fault {self.end}, {self.fault_ahead} batch(es) ahead"
        extra = "".join(f", then {kind} kill" if kind == WORKER else f", then {kind} restart"
                        for kind, _ in self.disruptions)
        return what + extra


def make_plan(profile: Profile, rng: random.Random, cluster: bool = False, python_workers: bool = True
              ) -> list[RunPlan]:
    """The runs, each ending with a fault point or an external kill, and the disruptions inside
    them. Worker kills only where there is a worker to kill: a Spark worker (`cluster`), or a
    Python worker (`python_workers`: the at-least-once sink and the TTL count run some; the
    exactly-once job without a TTL runs none, and a kill that waits for one would hold back the
    disruptions planned after it)."""
    faults = _faults()
    ends: list[str] = [point for _ in range(profile.fault_rounds) for point in faults.POINTS]
    ends += [KILL] * profile.external_kills
    rng.shuffle(ends)
    plans = []
    for end in ends:
        plan = RunPlan(end, fault_ahead=rng.randint(1, 2))
        if end == KILL:
            plan.kill_after_batches = rng.randint(0, 3)
            plan.kill_delay = rng.uniform(5, 40) if plan.kill_after_batches == 0 else rng.uniform(0, 3)
        plans.append(plan)
    # Disruptions go to runs that end with a fault (they last until the fault, at least a few batches);
    # never to the last one, so that something remains to be processed afterwards.
    hosts = [plan for plan in plans[:-1] if plan.end != KILL] or plans[:1]
    kinds = [WORKER] * (profile.worker_kills if cluster or python_workers else 0) + [BROKER] * profile.broker_restarts
    kinds += [S3] * (profile.s3_restarts if cluster else 0)
    rng.shuffle(kinds)
    order = rng.sample(hosts, len(hosts))  # one disruption per run while there are runs enough
    for i, kind in enumerate(kinds):
        order[i % len(order)].disruptions.append((kind, rng.uniform(0, 2)))
    for plan in plans:
        plan.fault_ahead += room_for(plan.disruptions)
    return plans


def room_for(disruptions: list[tuple[str, float]]) -> int:
    """Batches to leave before the fault fires, so that the disruptions come first: a worker is
    killed during the batch after the first one of the run; the broker restarts after one."""
    return sum(2 if kind == WORKER else 1 for kind, _ in disruptions)


# -- the runner ---------------------------------------------------------------------------

@dataclass
class Tally:
    kills: int = 0  # driver process group killed: by a fault point or from outside
    faults: int = 0
    fault_points: Counter[str] = field(default_factory=Counter)
    worker_kills: int = 0
    broker_restarts: int = 0
    s3_restarts: int = 0
    query_restarts: int = 0  # in-process restarts by the runner's restart strategy
    unexpected_exits: int = 0
    runs: int = 0


class Chaos:
    def __init__(self, kafka: Any, profile: Profile, guarantee: str, seed: int, workdir: Path,
                 say: Reporter, cluster: ClusterSetup | None = None) -> None:
        from {{ cookiecutter.package_name }}.config import JobConfig

        self.kafka, self.profile, self.guarantee, self.seed = kafka, profile, guarantee, seed
        self.workdir, self.say = workdir, say
        self.rng = random.Random(seed)
        self.bootstrap_servers = kafka.bootstrap_servers
        self.key_field = JobConfig().key_field
        suffix = f"{seed}-{uuid.uuid4().hex[:6]}"
        self.input_topic, self.output_topic = f"chaos-events-{suffix}", f"chaos-counts-{suffix}"
        self.dead_letter_topic, self.marker_topic = f"chaos-dead-{suffix}", f"chaos-markers-{suffix}"
        self.sink_id = f"chaos-{suffix}"
        self.cluster = cluster
        self.checkpoint_location = (f"s3a://{cluster.bucket}/checkpoints/{self.sink_id}" if cluster
                                    else str(workdir / "checkpoint"))
        self.fault_log = workdir / "faults.log"
        self.tally = Tally()
        self.input_end: dict[int, int] | None = None
        self.last_reported = -1
        self.finished = False
        self.current: subprocess.Popen | None = None
        self.deadline = time.monotonic() + profile.deadline

    # -- settings and checkpoint ---------------------------------------------------------
    def settings(self, plan: RunPlan) -> dict[str, str]:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "input_topic": self.input_topic,
            "output_topic": self.output_topic,
            "dead_letter_topic": self.dead_letter_topic,
            "marker_topic": self.marker_topic,
            "sink_id": self.sink_id,
            "transactional_id_prefix": "chaos",
            "delivery_guarantee": self.guarantee,
            "checkpoint_location": self.checkpoint_location,
            "filter": f"`{self.key_field}` != '{EXCLUDED_KEY}'",
            "trigger_interval_seconds": "0.5",
            "max_offsets_per_trigger": str(self.profile.drain_records_per_trigger if plan.end is None
                                           else self.profile.max_offsets_per_trigger),
            "shuffle_partitions": "2",
            "ui_port": "0",  # tests and benchmarks keep the UI and the metrics endpoint off
            "metrics_port": "0",
            "restart_strategy": "fixed-delay",
            "restart_attempts": "1000",
            "restart_delay_seconds": "1",
            **({f"s3.{name}": value for name, value in self.cluster.s3_settings("${" + SECRET_VARIABLE + "}").items()}
               if self.cluster else {}),
        }

    def committed(self) -> list[int]:
        from {{ cookiecutter.package_name }}.checkpoint import committed_batches
        from {{ cookiecutter.package_name }}.storage import resolve_location

        try:
            return committed_batches(resolve_location(self.checkpoint_location))
        except OSError:  # a directory listed while Spark renames into it
            return []

    def last_committed(self) -> int:
        committed = self.committed()
        return committed[-1] if committed else -1

    def drained(self, producer: InputProducer) -> bool:
        """Every input record is in a committed batch: its end offsets are the input's end."""
        from {{ cookiecutter.package_name }}.checkpoint import input_offsets
        from {{ cookiecutter.package_name }}.storage import resolve_location

        if not producer.done.is_set():
            return False
        if self.input_end is None:
            try:
                self.input_end = end_offsets(self.bootstrap_servers, self.input_topic)
            except Exception:  # noqa: BLE001 - the broker may be restarting: ask again later
                return False
        last = self.last_committed()
        if last < 0:
            return False
        try:
            offsets = input_offsets(resolve_location(self.checkpoint_location), last, self.input_topic)
        except (OSError, ValueError):
            return False
        if not offsets:
            return False
        return all(offsets.get(str(p), 0) >= end for p, end in self.input_end.items())

    def report_progress(self, force: bool = False) -> None:
        last = self.last_committed()
        if last != self.last_reported or force:
            self.last_reported = last
            self.say(f"  batches committed so far: {last + 1} (last batch {last})")

    # -- one run of the job ----------------------------------------------------------------
    def start_job(self, plan: RunPlan) -> tuple[subprocess.Popen, Path, int | None]:
        faults = _faults()
        env: dict[str, str] = {}
        fault_batch = None
        if plan.end in faults.POINTS:
            fault_batch = self.last_committed() + plan.fault_ahead
            env[faults.POINT_VARIABLE] = plan.end
            env[faults.BATCH_VARIABLE] = str(fault_batch)
            env[faults.LOG_VARIABLE] = str(self.fault_log)
        self.tally.runs += 1
        log_path = self.workdir / f"run-{self.tally.runs}.log"
        launcher = None
        if self.cluster is not None:
            launcher = ["bash", str(self.cluster.submit_script)]
            env.update({"SPARK_MASTER": self.cluster.spark.url, "CHECKPOINT_LOCATION": self.checkpoint_location,
                        "PYTHON": sys.executable, SECRET_VARIABLE: self.cluster.s3.secret_key,
                        "HADOOP_AWS_CLASSPATH": self.cluster.s3a_classpath})
        process = start_job(["run"], self.settings(plan), self.workdir, log_path, env, launcher)
        return process, log_path, fault_batch

    def kill_driver(self, process: subprocess.Popen, below: dict[int, tuple[int, int]]) -> None:
        """SIGKILL the driver's process group and every process below it (Spark's Python workers
        run in groups of their own): a lost machine."""
        below = {**below, **descendants(process.pid)}
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        kill_processes(below)
        process.wait()

    def kill_worker(self, process: subprocess.Popen, patient: bool) -> str | None:
        """SIGKILL one Python worker, preferably one running a task (a worker idle in Spark's
        pool is simply replaced); None when there is none yet and `patient`."""
        busy, others = busy_workers(process.pid)
        candidates = busy or ([] if patient else others)
        if not candidates:
            return None
        victim = self.rng.choice(candidates)
        description = command_line(victim)
        with contextlib.suppress(ProcessLookupError):
            os.kill(victim, signal.SIGKILL)
        state = "busy" if busy else "idle"
        return f"pid {victim}, {state}: {description[-50:]}"

    def disrupt(self, kind: str, process: subprocess.Popen, patient: bool) -> str | None:
        """One disruption inside a run: its victim, or None when it must be tried again later."""
        if kind == WORKER and self.cluster is not None:
            return self.kill_spark_worker()
        if kind == S3:
            self.restart_s3()
            return "s3"
        if kind == WORKER:
            victim = self.kill_worker(process, patient=patient)
            if victim:
                self.tally.worker_kills += 1
                self.say(f"run {self.tally.runs}: SIGKILL of a Python worker alone: {victim}")
            elif not patient:  # e.g. exactly-once without a TTL: the whole pipeline is in the JVM
                victim = "none"
                self.say(f"run {self.tally.runs}: no Python worker to kill: this job runs none")
            return victim
        self.restart_broker()
        return "broker"

    def stop_drained(self, process: subprocess.Popen, below: dict[int, tuple[int, int]]) -> None:
        """The input is drained: SIGTERM to the driver, which stops at a batch boundary."""
        self.say(f"run {self.tally.runs}: input drained; SIGTERM (stops at a batch boundary)")
        os.kill(self.python_driver(process), signal.SIGTERM)  # not the JVM: it must outlive the stop
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            self.say(f"run {self.tally.runs}: did not stop within 120s after SIGTERM: SIGKILL")
            self.kill_driver(process, below)

    def execute(self, plan: RunPlan, producer: InputProducer) -> RunPlan | None:
        """Run the job once as planned; return what remains to be done (a fault that did not
        fire, disruptions that did not happen), if anything."""
        faults = _faults()
        before = self.last_committed()
        fired_before = len(self.fired())
        process, log_path, fault_batch = self.start_job(plan)
        self.current = process
        self.say(f"run {self.tally.runs} (pid {process.pid}): {plan.describe()}"
                 + (f" -> {faults.BATCH_VARIABLE}={fault_batch}" if fault_batch is not None else "")
                 + f"; log {log_path.name}")
        started = time.monotonic()
        pending = deque(plan.disruptions)
        disrupted = 0  # the k-th disruption waits for k+1 batches committed in this run
        due: float | None = None
        kill_due: float | None = started + plan.kill_delay if plan.end == KILL and not plan.kill_after_batches else None
        drained_at: float | None = None
        killed_by_us = stopped_by_us = False
        below: dict[int, tuple[int, int]] = {}
        polls = 0
        while process.poll() is None:
            now = time.monotonic()
            polls += 1
            if polls % 4 == 1:
                below.update(descendants(process.pid))
            self.report_progress()
            done_here = max(0, self.last_committed() - before)
            # Disruptions inside the run: after a batch committed in this run, at a random delay.
            if pending and due is None and done_here > disrupted:
                due = now + pending[0][1]
            if pending and due is not None and now >= due:
                victim = self.disrupt(pending[0][0], process, patient=now < due + 15)
                if victim:
                    pending.popleft()
                    disrupted += 1
                    due = None
            if plan.end == KILL and kill_due is None and done_here >= plan.kill_after_batches:
                kill_due = now + plan.kill_delay
            if plan.end == KILL and kill_due is not None and now >= kill_due:
                self.say(f"run {self.tally.runs}: SIGKILL of the driver's process group "
                         f"({now - started:.1f}s after start, {done_here} batches in this run)")
                self.kill_driver(process, below)
                killed_by_us = True
                break
            if self.drained(producer):
                drained_at = drained_at or now
                if plan.end is None:
                    if pending:
                        self.say(f"run {self.tally.runs}: input drained before {len(pending)} disruption(s): "
                                 "dropped")
                        pending.clear()
                    stopped_by_us = True
                    self.stop_drained(process, below)
                    break
                if now - drained_at > 20:
                    self.say(f"run {self.tally.runs}: the input is drained and nothing fired: SIGKILL")
                    self.kill_driver(process, below)
                    killed_by_us = True
                    break
            if now - started > self.profile.run_timeout or now > self.deadline:
                self.say(f"run {self.tally.runs}: no end after {now - started:.0f}s: SIGKILL")
                self.kill_driver(process, below)
                killed_by_us = True
                break
            time.sleep(0.25)
        # Whatever ended the run, none of its processes may survive it.
        self.kill_driver(process, below)
        fired = self.fired()[fired_before:]
        self.account(plan, process.returncode, log_path, fired, killed_by_us, stopped_by_us,
                     f"{time.monotonic() - started:.1f}s, {max(0, self.last_committed() - before)} batches committed")
        self.report_progress(force=True)
        if plan.end in faults.POINTS and not fired:
            return RunPlan(plan.end, fault_ahead=1, disruptions=list(pending), attempt=plan.attempt + 1)
        if pending:
            return RunPlan(None, disruptions=list(pending))
        return None

    def account(self, plan: RunPlan, code: int | None, log_path: Path, fired: list[str], killed_by_us: bool,
                stopped_by_us: bool, ran: str) -> None:
        """How a run ended, in the tally and in one line."""
        job_log = log_path.read_text(errors="replace")
        restarts = job_log.count("restarting the query") + job_log.count("the query starts again from its checkpoint")
        self.tally.query_restarts += restarts
        ran += f", {restarts} in-process query restart(s)" if restarts else ""
        if fired:
            self.tally.kills += 1
            self.tally.faults += 1
            self.tally.fault_points[plan.end or "?"] += 1
            self.say(f"run {self.tally.runs}: {fired[0]} -> driver killed (exit {code}; {ran})")
        elif killed_by_us:
            self.tally.kills += 1
            self.say(f"run {self.tally.runs}: driver killed (exit {code}; {ran})")
        elif stopped_by_us and code == 0:
            self.say(f"run {self.tally.runs}: stopped cleanly ({ran})")
            self.finished = True
        else:
            self.tally.unexpected_exits += 1
            tail = " | ".join(job_log.strip().splitlines()[-3:])[-400:]
            self.say(f"run {self.tally.runs}: the job exited by itself with code {code} ({ran}): {tail}")

    def python_driver(self, process: subprocess.Popen) -> int:
        """The process that stops the job cleanly on SIGTERM: the job's Python driver. Under
        spark-submit (--cluster) that is a child of spark-submit's JVM, which SIGTERM would kill."""
        if self.cluster is None:
            return process.pid
        for pid in descendants(process.pid):
            if "deploy/main.py" in command_line(pid):
                return pid
        return process.pid

    def kill_spark_worker(self) -> str:
        """SIGKILL of one Spark worker and its executor JVM; it comes back a few seconds later."""
        assert self.cluster is not None
        index = self.rng.randrange(len(self.cluster.spark.workers))
        killed = self.cluster.spark.kill_worker(index)
        self.tally.worker_kills += 1
        self.say(f"run {self.tally.runs}: SIGKILL of Spark worker {index} and its executor (pids {killed})")
        time.sleep(3)
        self.cluster.spark.start_worker(index)
        self.say(f"run {self.tally.runs}: Spark worker {index} registered again")
        return f"worker {index}"

    def restart_s3(self) -> None:
        assert self.cluster is not None
        self.say("kill -9 of the S3 server; restarting it on the same data")
        seconds = self.cluster.restart_s3()
        self.tally.s3_restarts += 1
        self.say(f"S3 server serving again after 3s down and {seconds:.1f}s to start")

    def fired(self) -> list[str]:
        return self.fault_log.read_text().splitlines() if self.fault_log.exists() else []

    def restart_broker(self) -> None:
        if self.kafka.restart_broker is None:
            self.say(f"broker restart skipped: provider {self.kafka.provider} cannot restart its broker")
            return
        self.say("kill -9 of the Kafka broker; restarting it on the same data")
        started = time.monotonic()
        with BROKER_LOCK:
            self.kafka.restart_broker()
        self.tally.broker_restarts += 1
        self.say(f"broker serving again after {time.monotonic() - started:.1f}s")

    # -- the whole run -----------------------------------------------------------------------
    def run(self) -> int:
        from {{ cookiecutter.package_name }}.config import JobConfig

        from .sample import COLORS, make_events

        profile = self.profile
        keys = COLORS + [f"k{i:04d}" for i in range(max(0, profile.keys - len(COLORS)))]
        schema = {**JobConfig().schema, self.key_field: "string"}

        def keep(events: list[dict]) -> list[bool]:  # the run's own filter (options())
            return [event[self.key_field] != EXCLUDED_KEY for event in events]

        sample = make_events(profile.events, self.seed, schema, self.key_field, keep, profile.malformed_rate, keys)
        python_workers = self.guarantee == "at-least-once" or JobConfig().state_ttl_seconds > 0
        plans = make_plan(profile, self.rng, cluster=self.cluster is not None, python_workers=python_workers)
        self.say(f"input: {profile.events} records ({sample.malformed} malformed, {len(keys)} skewed keys) "
                 f"over {profile.partitions} partitions of {self.input_topic}, in {profile.chunks} chunks "
                 f"{profile.chunk_interval:.0f}s apart while the job runs; "
                 f"max_offsets_per_trigger={profile.max_offsets_per_trigger}")
        self.say("plan: " + "; ".join(f"{i + 1}) {p.describe()}" for i, p in enumerate(plans))
                 + f"; {len(plans) + 1}) clean run until drained")
        with BROKER_LOCK:
            create_topics(self.bootstrap_servers, {self.input_topic: profile.partitions, self.output_topic: 2,
                                                   self.dead_letter_topic: 1}, client=QUIET)
        producer = InputProducer(self.bootstrap_servers, self.input_topic, sample.values, profile.partitions,
                                 profile.chunks, profile.chunk_interval, self.say)
        queue = deque(plans)
        producer.start()  # with the first run: the input arrives while the job runs
        most_runs = 3 * len(plans) + 10
        while not self.finished and time.monotonic() < self.deadline and self.tally.runs < most_runs:
            plan = queue.popleft() if queue else RunPlan(None)
            if plan.attempt > 3:
                self.say(f"giving up on fault {plan.end}: it did not fire in 3 runs")
                continue
            if plan.end is None and not plan.disruptions and self.drained(producer):
                self.say("the input is drained: no further run needed")
                self.finished = True
                break
            try:
                left = self.execute(plan, producer)
            except BaseException:  # interrupted: leave no job behind
                if self.current is not None:
                    self.kill_driver(self.current, {})
                raise
            if left is None:
                continue
            if left.end is None and queue:  # disruptions that did not happen: the next run takes them
                queue[0].disruptions[:0] = left.disruptions
                queue[0].fault_ahead += room_for(left.disruptions)
            else:
                queue.appendleft(left)
        completed = self.finished
        producer.done.wait(max(1.0, self.deadline - time.monotonic()))
        if not completed:
            self.say("the deadline passed before the input was drained: verifying what was published")
        return self.verify(sample.malformed_values, completed)

    # -- the independent check ----------------------------------------------------------------
    def verify(self, malformed_values: list[bytes], completed: bool) -> int:
        with BROKER_LOCK:
            inputs, published = self.read_back()
        return self.judge(inputs, published, malformed_values, completed)

    def read_back(self) -> tuple[list[tuple[int, int, bytes | None]], Any]:
        """The input topic, with each record's partition and offset, and what was published,
        both with read_committed."""
        from .readback import read_positions, read_published

        for attempt in range(1, 4):
            try:
                inputs = read_positions(self.bootstrap_servers, self.input_topic, timeout=300)
                return inputs, read_published(self.bootstrap_servers, self.output_topic, self.dead_letter_topic)
            except (RuntimeError, TimeoutError) as error:
                if attempt == 3:
                    raise
                self.say(f"reading back failed ({error}); again in 10s")
                time.sleep(10)
        raise AssertionError("unreachable")

    def counted_key(self, malformed: set[bytes]) -> Callable[[bytes | None], str | None]:
        def key_of(value: bytes | None) -> str | None:
            if value is None or value in malformed:
                return None
            key = json.loads(value)[self.key_field]
            return None if key == EXCLUDED_KEY else key

        return key_of

    def judge(self, positioned: list[tuple[int, int, bytes | None]], published: Any, malformed_values: list[bytes],
              completed: bool) -> int:
        from {{ cookiecutter.package_name }}.checkpoint import batch_ends
        from {{ cookiecutter.package_name }}.storage import resolve_location

        from .verify import verify, verify_batches

        inputs = [value for _partition, _offset, value in positioned]

        t = self.tally
        malformed_set = set(malformed_values)
        expected: Counter[str] = Counter()
        malformed: list[bytes] = []
        records = 0
        # The expectation comes from the input topic itself (read_committed), not from the job.
        for value in inputs:
            records += 1
            if value in malformed_set:
                malformed.append(value)
                continue
            key = json.loads(value)[self.key_field]
            if key != EXCLUDED_KEY:
                expected[key] += 1
        if records != self.profile.events:
            self.say(f"input: the topic holds {records} records, {self.profile.events} were produced")
        verdict = verify(published, dict(expected), malformed)
        # Every intermediate count too, batch by batch (the final counts alone miss a skipped batch).
        verify_batches(verdict, published, positioned, self.counted_key(malformed_set),
                       batch_ends(resolve_location(self.checkpoint_location), self.input_topic))
        batches = {batch for history in published.counts.values() for batch, _ in history}
        self.say(f"verify (read_committed): {sum(len(h) for h in published.counts.values())} count records "
                 f"for {len(published.counts)} keys over {len(batches)} batches, {len(published.dead_letters)} "
                 f"dead letters ({len(malformed)} malformed records in the input); not_increasing="
                 f"{verdict.not_increasing} wrong_counts={verdict.wrong_counts} "
                 f"missing_updates={verdict.missing_updates}")
        for problem in verdict.problems[:10]:
            self.say(f"  problem: {problem}")
        if len(verdict.problems) > 10:
            self.say(f"  ... {len(verdict.problems) - 10} more problems")
        self.say(f"summary: runs={t.runs} kills={t.kills} faults={t.faults} "
                 f"({', '.join(f'{p}={n}' for p, n in sorted(t.fault_points.items()))}) worker_kills="
                 f"{t.worker_kills} query_restarts={t.query_restarts} broker_restarts={t.broker_restarts} "
                 f"s3_restarts={t.s3_restarts} "
                 f"unexpected_exits={t.unexpected_exits} completed={str(completed).lower()} "
                 f"duration={self.say.elapsed():.0f}s")
        self.say.line(f"chaos: seed={self.seed} guarantee={self.guarantee} records={records} kills={t.kills} "
                      f"broker_restarts={t.broker_restarts} faults={t.faults} lost={verdict.lost} "
                      f"duplicated={verdict.duplicated} dead_letter_ok={str(verdict.dead_letter_ok).lower()}")
        if not completed:
            return 1
        if self.guarantee == "exactly-once":
            return 0 if verdict.exactly_once else 1
        return 0


def end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """The input's end offsets (its last stable offsets: the input is not transactional)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"chaos-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, **QUIET})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in sorted(metadata.partitions)}
    finally:
        consumer.close()
