"""The plan of a chaos run: which runs of the job end how (a fault point of the sink, an external
SIGKILL) and which disruptions happen inside them. Pure: the same seed gives the same plan."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

KILL = "kill"  # a run that ends with an external SIGKILL of the driver's process group
OUTPUT_KILL = "output-kill"  # ... the moment a read_committed consumer sees the run's first output record
# A run whose driver is frozen (SIGSTOP of its process group) while a second one starts on the
# checkpoint, and woken (SIGCONT) 20-60 s later: it must stop without publishing. The second run
# goes on, and is SIGKILLed a little after.
ZOMBIE = "zombie"
WORKER, BROKER, S3 = "worker", "broker", "s3"  # disruptions inside a run
GROW = "grow"  # the input topic gains partitions
# Broker faults on a three-broker cluster (BROKER: kill -9 and restart of a node, each in turn).
LEADER = "leader"  # kill -9 of the leader of output partition 0, and its restart
COORDINATOR = "coordinator"  # ... of the broker coordinating the sink's transactions (shard 0)
TWO_NODES = "two-nodes"  # kill -9 of two of the three nodes, 10 s down: fewer than min.insync.replicas
ROLLING = "rolling"  # each node in turn stopped as an operator stops it (SIGTERM) and started
HANG = "hang"  # SIGSTOP of a node, past the clients' request time-outs, then SIGCONT
HANG_COORDINATOR = "hang-coordinator"  # ... of the sink's transaction coordinator
CLUSTER_FAULTS = (LEADER, COORDINATOR, TWO_NODES, ROLLING, HANG, HANG_COORDINATOR)
BROKER_FAULTS = (BROKER, *CLUSTER_FAULTS)


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
    fault_rounds: int  # every fault point fires this many times (each one a driver kill) ...
    external_kills: int  # SIGKILLs of the driver's process group at random moments, besides the faults
    worker_kills: int
    broker_restarts: int
    s3_restarts: int  # --cluster only: kill -9 of the S3 server and a restart on the same data
    run_timeout: float  # a run that neither finishes nor dies in this time is killed
    deadline: float  # the whole run, start-up and verification included
    fault_points: int = 0  # ... or only this many of them, chosen by the seed (0: every one)
    output_kills: int = 0  # SIGKILLs the moment a run's first output is visible (OUTPUT_KILL)
    zombies: int = 0  # zombie drivers (ZOMBIE), in turn at each of ZOMBIE_POINTS
    cluster_faults: int = 0  # each of CLUSTER_FAULTS this many times (three brokers only)
    input_growths: int = 0  # the input topic grows by 2 partitions, this many times
    aborted_input_share: float = 0.0  # this share of input chunks is followed by an aborted transaction
    commit_shards: int = 1
    publish_from: tuple[str, ...] = ("auto",)  # each run publishes from one of these, drawn by the seed


# Where a zombie driver is frozen: between its produce and its Kafka commit, between that commit
# and its sink log entry, or at a random moment (None).
ZOMBIE_POINTS: tuple[str | None, ...] = ("before_kafka_commit", "after_kafka_commit", None)


# Each job start costs Spark's start-up: the fault runs are the driver kills, the worker kill and
# the broker restart happen inside them, then one clean run drains the rest.
QUICK = Profile(events=20_000, partitions=4, keys=60, malformed_rate=0.01, max_offsets_per_trigger=500,
                drain_records_per_trigger=10_000,
                chunks=10, chunk_interval=6.0, fault_rounds=1, external_kills=0, worker_kills=1,
                broker_restarts=1, s3_restarts=1, run_timeout=600, deadline=2400)

PROFILES = {
    "quick": QUICK,
    # quick's input and disruptions, three fault points: the cluster suite's, whose crash test fires
    # every point on the cluster already.
    "smoke": replace(QUICK, fault_points=3),
    # The nightly soak, on three brokers: a million events, every fault kind many times.
    "soak": Profile(events=1_000_000, partitions=8, keys=2000, malformed_rate=0.005, max_offsets_per_trigger=2000,
                    drain_records_per_trigger=100_000, chunks=100, chunk_interval=3.0, fault_rounds=10,
                    external_kills=15, output_kills=35, zombies=9, worker_kills=4, broker_restarts=2,
                    cluster_faults=2, input_growths=2, aborted_input_share=0.1, commit_shards=3,
                    publish_from=("auto", "tasks"), s3_restarts=2, run_timeout=900, deadline=5 * 3600),
    "long": Profile(events=200_000, partitions=8, keys=400, malformed_rate=0.01, max_offsets_per_trigger=2000,
                    drain_records_per_trigger=40_000,
                    chunks=50, chunk_interval=4.0, fault_rounds=2, external_kills=6, worker_kills=4,
                    broker_restarts=2, s3_restarts=2, run_timeout=900, deadline=7200, aborted_input_share=0.1),
}


@dataclass
class RunPlan:
    end: str | None  # a fault point, KILL, or None: run until the input is drained
    fault_ahead: int = 1  # the fault fires at the first batch >= last committed + this
    kill_after_batches: int = 0  # KILL: once this run committed this many batches ...
    kill_delay: float = 0.0  # ... and this many seconds later (from the start when 0 batches)
    disruptions: list[tuple[str, float]] = field(default_factory=list)  # (kind, seconds after a commit)
    attempt: int = 1
    publish_from: str = "auto"
    zombie_point: str | None = None  # ZOMBIE: where the driver is frozen (None: a random moment) ...
    zombie_wake: float = 0.0  # ... and how long after the replacement's start it wakes

    def describe(self) -> str:
        if self.end is None:
            what = "clean run until the input is drained"
        elif self.end == KILL:
            what = (f"SIGKILL of the driver {self.kill_delay:.1f}s after "
                    + (f"{self.kill_after_batches} batches" if self.kill_after_batches else "start"))
        elif self.end == OUTPUT_KILL:
            what = "SIGKILL of the driver the moment its first output is visible"
        elif self.end == ZOMBIE:
            what = (f"zombie: frozen at {self.zombie_point or 'a random moment'}, a replacement started, "
                    f"woken {self.zombie_wake:.0f}s later")
        else:
            what = f"fault {self.end}, {self.fault_ahead} batch(es) ahead"
        extra = "".join(f", then {kind} kill" if kind == WORKER else f", then {kind}" if kind in (GROW, *CLUSTER_FAULTS)
                        else f", then {kind} restart" for kind, _ in self.disruptions)
        return what + extra + (f" [publish_from={self.publish_from}]" if self.publish_from != "auto" else "")


def make_plan(profile: Profile, rng: random.Random, points: Sequence[str], cluster: bool = False,
              python_workers: bool = True, brokers: int = 1) -> list[RunPlan]:
    """The runs, each ending with one of the sink's fault `points`, an external kill or a zombie,
    and the disruptions inside them. Worker kills only where there is a worker to kill: a Spark
    worker (`cluster`), or a Python worker (`python_workers`: the at-least-once sink and the TTL
    count run some; the exactly-once job without a TTL runs none but while it publishes from
    tasks, and a kill that waits for one would hold back the disruptions planned after it). The
    cluster's broker faults only on three
    `brokers`."""
    if profile.fault_points:
        points = rng.sample(list(points), min(profile.fault_points, len(points)))
    ends: list[str] = [point for _ in range(profile.fault_rounds) for point in points]
    ends += [KILL] * profile.external_kills + [OUTPUT_KILL] * profile.output_kills + [ZOMBIE] * profile.zombies
    rng.shuffle(ends)
    plans = []
    zombies = 0
    for end in ends:
        plan = RunPlan(end, fault_ahead=rng.randint(1, 2), publish_from=rng.choice(profile.publish_from))
        if end == KILL:
            plan.kill_after_batches = rng.randint(0, 3)
            plan.kill_delay = rng.uniform(5, 40) if plan.kill_after_batches == 0 else rng.uniform(0, 3)
        if end == ZOMBIE:
            plan.zombie_point = ZOMBIE_POINTS[zombies % len(ZOMBIE_POINTS)]
            plan.zombie_wake = rng.uniform(20, 60)
            zombies += 1
        plans.append(plan)
    # Disruptions go to runs that end with a fault (they last until the fault, at least a few batches);
    # never to the last one, so that something remains to be processed afterwards.
    hosts = [plan for plan in plans[:-1] if plan.end not in (KILL, OUTPUT_KILL, ZOMBIE)] or plans[:1]
    # A job that runs no Python worker otherwise runs some while it publishes from Spark tasks: a
    # run that hosts a worker kill then publishes from tasks (the kill may meet a shard's transaction).
    publishing_workers = not (cluster or python_workers) and "tasks" in profile.publish_from
    kinds = [WORKER] * (profile.worker_kills if cluster or python_workers or publishing_workers else 0)
    kinds += [BROKER] * profile.broker_restarts
    kinds += [S3] * (profile.s3_restarts if cluster else 0)
    kinds += [GROW] * profile.input_growths
    kinds += [kind for kind in CLUSTER_FAULTS for _ in range(profile.cluster_faults if brokers >= 3 else 0)]
    rng.shuffle(kinds)
    order = rng.sample(hosts, len(hosts))  # one disruption per run while there are runs enough
    for i, kind in enumerate(kinds):
        host = order[i % len(order)]
        host.disruptions.append((kind, rng.uniform(0, 2)))
        if kind == WORKER and publishing_workers:
            host.publish_from = "tasks"
    for plan in plans:
        plan.fault_ahead += room_for(plan.disruptions)
    return plans


def room_for(disruptions: list[tuple[str, float]]) -> int:
    """Batches to leave before the fault fires, so that the disruptions come first: a worker is
    killed during the batch after the first one of the run; the broker restarts after one."""
    return sum(2 if kind == WORKER else 1 for kind, _ in disruptions)
