"""The chaos runner's plan and verdict line: a seed gives one schedule, whatever the process."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections import Counter

from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}_tools.chaos import PROFILES, VERDICT_LINE
from {{ cookiecutter.package_name }}_tools.chaos.plan import (
    BROKER,
    CLUSTER_FAULTS,
    GROW,
    KILL,
    OUTPUT_KILL,
    S3,
    WORKER,
    ZOMBIE,
    ZOMBIE_POINTS,
    make_plan,
    room_for,
)
from {{ cookiecutter.package_name }}_tools.chaos.verdict import Tally, expectation, kept_event, verdict_line
from {{ cookiecutter.package_name }}_tools.verify import Verdict

QUICK, LONG = PROFILES["quick"], PROFILES["long"]


def described(seed: int, **options: bool) -> list[str]:
    return [plan.describe() for plan in make_plan(LONG, random.Random(seed), faults.POINTS, **options)]


def test_a_seed_gives_the_same_plan_in_another_process():
    script = ("import random; from {{ cookiecutter.package_name }}.sink import faults; "
              "from {{ cookiecutter.package_name }}_tools.chaos.plan import PROFILES, make_plan; "
              "print([p.describe() for p in make_plan(PROFILES['long'], random.Random(7), faults.POINTS)])")
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout.strip()
    assert other == str(described(7))


def test_other_seeds_give_other_plans():
    assert len({tuple(described(seed)) for seed in range(1, 6)}) == 5


def test_every_fault_point_ends_a_run_once_per_round_and_the_external_kills_come_on_top():
    plans = make_plan(LONG, random.Random(3), faults.POINTS)
    ends = Counter(plan.end for plan in plans)
    assert ends == {**{point: LONG.fault_rounds for point in faults.POINTS}, KILL: LONG.external_kills}


def test_the_smoke_profile_fires_three_fault_points_chosen_by_the_seed_with_every_disruption():
    smoke = PROFILES["smoke"]
    chosen = set()
    for seed in range(10):
        plans = make_plan(smoke, random.Random(seed), faults.POINTS, cluster=True)
        ends = Counter(plan.end for plan in plans)
        assert sum(ends.values()) == 3 and set(ends.values()) == {1} and set(ends) <= set(faults.POINTS)
        assert Counter(kind for plan in plans for kind, _ in plan.disruptions) == {
            WORKER: smoke.worker_kills, BROKER: smoke.broker_restarts, S3: smoke.s3_restarts}
        chosen |= set(ends)
    assert chosen == set(faults.POINTS)  # over seeds, every point gets its turn


def test_disruptions_go_to_fault_runs_other_than_the_last_and_faults_leave_room_for_them():
    for seed in range(20):
        plans = make_plan(QUICK, random.Random(seed), faults.POINTS, cluster=True)
        kinds = Counter(kind for plan in plans for kind, _ in plan.disruptions)
        assert kinds == {WORKER: QUICK.worker_kills, BROKER: QUICK.broker_restarts, S3: QUICK.s3_restarts}
        assert not plans[-1].disruptions
        for plan in plans:
            assert plan.end != KILL or not plan.disruptions
            assert plan.fault_ahead - room_for(plan.disruptions) in (1, 2)


def test_no_worker_kill_is_planned_for_a_job_that_runs_no_python_worker_and_no_s3_restart_without_a_cluster():
    plans = make_plan(QUICK, random.Random(1), faults.POINTS, cluster=False, python_workers=False)
    assert {kind for plan in plans for kind, _ in plan.disruptions} == {BROKER}


def test_the_soak_schedule_has_the_figures_it_promises_on_three_brokers():
    """Over 100 driver kills (the fault points', the external ones, the zombies' replacements),
    30 of them the moment output appears, every point of the commit protocol 10 times, zombies at
    each of their points, every broker fault, growth of the input, runs publishing from tasks."""
    soak = PROFILES["soak"]
    plans = make_plan(soak, random.Random(5), faults.POINTS, brokers=3)
    ends = Counter(plan.end for plan in plans)
    assert all(ends[point] >= 10 for point in faults.POINTS), ends
    assert ends[OUTPUT_KILL] >= 30
    kills = sum(ends[point] for point in faults.POINTS) + ends[KILL] + ends[OUTPUT_KILL] + ends[ZOMBIE]
    assert kills >= 100, ends
    assert set(ZOMBIE_POINTS) - {None} <= set(faults.POINTS)
    assert {plan.zombie_point for plan in plans if plan.end == ZOMBIE} == set(ZOMBIE_POINTS)
    assert all(20 <= plan.zombie_wake <= 60 for plan in plans if plan.end == ZOMBIE)
    kinds = Counter(kind for plan in plans for kind, _ in plan.disruptions)
    assert all(kinds[kind] >= 1 for kind in (*CLUSTER_FAULTS, BROKER, GROW)), kinds
    assert {plan.publish_from for plan in plans} == {"auto", "tasks"}
    # The exactly-once job without a TTL runs Python workers only to publish from tasks: there.
    workers = [plan for plan in make_plan(soak, random.Random(5), faults.POINTS, python_workers=False, brokers=3)
               if any(kind == WORKER for kind, _ in plan.disruptions)]
    assert workers and all(plan.publish_from == "tasks" for plan in workers)
    assert soak.events >= 1_000_000 and soak.commit_shards > 1 and soak.aborted_input_share > 0
    # Input for every planned run: a run commits 2-3 batches on average (measured in a soak on three
    # brokers), and a fault that finds no batch to fire in cannot fire.
    assert soak.events / soak.max_offsets_per_trigger >= 3.5 * len(plans), (soak.events, len(plans))


def test_the_clusters_broker_faults_are_not_planned_on_one_broker():
    plans = make_plan(PROFILES["soak"], random.Random(5), faults.POINTS, brokers=1)
    kinds = {kind for plan in plans for kind, _ in plan.disruptions}
    assert not kinds & set(CLUSTER_FAULTS) and BROKER in kinds


def count_model(events):
    """A count per key `k`: the verdict's test query, whatever pipeline/query.py computes."""
    counts: Counter[str] = Counter()
    for event in events:
        counts[event["k"]] += 1
        yield event["k"], {"key": event["k"], "count": counts[event["k"]]}


def test_the_expectation_models_the_kept_well_formed_records_and_the_malformed_ones_as_dead_letters():
    malformed = {b"{broken"}
    values: list[bytes | None] = [b'{"k": "a"}', b'{"k": "orange"}', b"{broken", b'{"k": "a"}', None, b'{"k": "b"}']
    answers, dead = expectation(values, kept_event("k", malformed), malformed, count_model, "upsert")
    assert (answers.answers, dead) == ({"a": {"key": "a", "count": 2}, "b": {"key": "b", "count": 1}}, [b"{broken"])


def test_the_verdict_line_is_the_one_the_tests_parse():
    line = verdict_line(5, "exactly-once", 100, Tally(kills=6, faults=5, broker_restarts=1), Verdict(lost=2))
    match = VERDICT_LINE.match(line)
    assert match is not None, line
    assert match.groupdict() == {"seed": "5", "guarantee": "exactly-once", "records": "100", "kills": "6",
                                 "broker_restarts": "1", "faults": "5", "lost": "2", "duplicated": "0",
                                 "dead_letter_ok": "true"}
