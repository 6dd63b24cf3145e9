"""The plan of a chaos run: which runs of the job end how (a fault point of the sink, an external
SIGKILL) and which disruptions happen inside them. Pure: the same seed gives the same plan."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

KILL = "kill"  # a run that ends with an external SIGKILL of the driver's process group
WORKER, BROKER, S3 = "worker", "broker", "s3"  # disruptions inside a run


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
    "long": Profile(events=200_000, partitions=8, keys=400, malformed_rate=0.01, max_offsets_per_trigger=2000,
                    drain_records_per_trigger=40_000,
                    chunks=50, chunk_interval=4.0, fault_rounds=2, external_kills=6, worker_kills=4,
                    broker_restarts=2, s3_restarts=2, run_timeout=900, deadline=7200),
}


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


def make_plan(profile: Profile, rng: random.Random, points: Sequence[str], cluster: bool = False,
              python_workers: bool = True) -> list[RunPlan]:
    """The runs, each ending with one of the sink's fault `points` or an external kill, and the
    disruptions inside them. Worker kills only where there is a worker to kill: a Spark worker
    (`cluster`), or a Python worker (`python_workers`: the at-least-once sink and the TTL count run
    some; the exactly-once job without a TTL runs none, and a kill that waits for one would hold
    back the disruptions planned after it)."""
    if profile.fault_points:
        points = rng.sample(list(points), min(profile.fault_points, len(points)))
    ends: list[str] = [point for _ in range(profile.fault_rounds) for point in points]
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
