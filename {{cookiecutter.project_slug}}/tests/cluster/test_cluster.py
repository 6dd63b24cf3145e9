"""Exactly-once on a Spark standalone cluster with the checkpoint on S3: the job submitted by
deploy/spark-submit.sh to a master and two workers, killed at every step of the commit protocol,
and a worker (with its executor) lost in the middle of a run; every time, the output that a
read_committed consumer sees is checked against the input, batch by batch."""

from __future__ import annotations

import argparse
import io
import random
import threading
import time

import pytest

from {{ cookiecutter.package_name }}.pipeline import query
from {{ cookiecutter.package_name }}_tools import chaos
from {{ cookiecutter.package_name }}_tools.chaos.plan import PROFILES

from harness import PUBLISHED_BEFORE_THE_CRASH, crash_at_each_point, merged, produce_sample, submit_args, wait_until

pytestmark = pytest.mark.cluster


def exact(job, *samples) -> None:
    kept, malformed = merged(*samples)
    verdict = job.verify(kept, malformed)
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated, verdict.wrong_answers, verdict.missing_updates) == (0, 0, 0, 0)
    assert verdict.dead_letter_ok


@pytest.mark.timeout(3600)  # eight submissions to the cluster: a hang guard for a loaded machine, not a bound
def test_exactly_once_on_the_cluster_through_a_crash_at_each_point(cluster_job, spark_cluster, s3_server,
                                                                   named_crash_points):
    """The driver SIGKILLed at every step of the protocol (or those `--crash-points` names), one
    after the other on one checkpoint in S3 (harness.crash_at_each_point), each run submitted to
    the cluster by spark-submit.sh, with phase 2 in the executors' publishing tasks (the points of
    steps 3 and 4 fire there).
    Judged by the query's model; the run without faults that judges the same test locally and on
    three brokers is left out here, for the suite's time."""
    verdict, crashes = crash_at_each_point(cluster_job, named_crash_points, seed=23, reference_run=False,
                                           publish_from="tasks")
    for crash in crashes:
        assert crash.visible == (crash.fault in PUBLISHED_BEFORE_THE_CRASH), crash
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated, verdict.wrong_answers, verdict.missing_updates) == (0, 0, 0, 0)
    assert verdict.dead_letter_ok
    runs = len(named_crash_points) + 1
    assert spark_cluster.applications().count("{{ cookiecutter.project_slug }}") >= runs, "the runs were not on the cluster"
    # Submitted from its job file, the job kept its checkpoint where the file says, in the bucket,
    # and nothing on the driver's disk.
    bucket, _, prefix = cluster_job.checkpoint_location.removeprefix("s3a://").partition("/")
    pages = s3_server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    stored = {item["Key"].removeprefix(prefix + "/").split("/")[0]
              for page in pages for item in page.get("Contents", [])}
    kept = {"offsets", "commits", "sinks"} | ({"state"} if query.KEEPS_STATE else set())  # a stateless query has none
    assert kept <= stored, sorted(stored)
    assert not (cluster_job.workdir / "{{ cookiecutter.checkpoint_location }}").exists()


def test_a_worker_lost_in_the_middle_of_a_run_costs_nothing(cluster_job, spark_cluster):
    """SIGKILL of a worker and its executor while batches run: Spark runs the lost tasks on the
    other worker, and the output stays exact. The worker comes back for the next test."""
    job = cluster_job
    job.launcher_env["SPARK_SUBMIT_ARGS"] = submit_args(executors=2)  # one on each worker
    first = produce_sample(job, count=4000, seed=91, partitions=4)
    outcome: dict = {}
    running = threading.Thread(target=lambda: outcome.update(run=job.run(max_offsets_per_trigger="400",
                                                                         until_idle=4, timeout=600)))
    running.start()
    wait_until(lambda: job.published().answers, 300, "a count published on the cluster", interval=1)
    killed = spark_cluster.kill_worker(0)
    assert len(killed) >= 2, "the worker had no executor to lose"
    second = produce_sample(job, count=2000, seed=92, partitions=4)
    running.join(600)
    spark_cluster.start_worker(0)
    assert outcome["run"].returncode == 0, outcome["run"].stdout[-3000:]
    exact(job, first, second)


def test_the_s3_server_killed_while_the_job_writes_its_checkpoint_costs_nothing(cluster_job, s3_server):
    """The checkpoint's store fails in the middle of its writes: while batches run (each writes its
    offsets, its state's files, the sink's log entry and its commit to the bucket, 0.5 s apart),
    the S3 server is SIGKILLed at moments drawn from a seed, four times, each time back 2 s later
    on the same data, and more input follows each kill, so that the job has batches to write
    whatever the machine's speed (it waits out 30 s without input before it ends). The job waits
    (the S3 clients' retries) or restarts its query from the checkpoint; the output stays exact."""
    job = cluster_job
    samples = [produce_sample(job, count=2000, seed=95, partitions=4)]
    outcome: dict = {}
    running = threading.Thread(target=lambda: outcome.update(run=job.run(
        max_offsets_per_trigger="150", until_idle=60, timeout=1200, restart_strategy="fixed-delay",
        restart_attempts="100")))
    running.start()
    rng, kills = random.Random(95), 0
    try:
        wait_until(lambda: job.published().answers, 600, "a count published on the cluster", interval=0.5)
        while running.is_alive() and kills < 4:
            time.sleep(rng.uniform(0.5, 2.5))
            s3_server.stop()
            kills += 1
            time.sleep(2.0)
            s3_server.start()
            samples.append(produce_sample(job, count=500, seed=95 + kills, partitions=4))
    finally:
        if s3_server.process is None:
            s3_server.start()
        running.join(1200)
    assert kills == 4, f"the run ended after {kills} kills of the S3 server"
    assert outcome["run"].returncode == 0, outcome["run"].stdout[-3000:]
    exact(job, *samples)


@pytest.mark.timeout(3600)
def test_the_chaos_smoke_profile_on_the_cluster(kafka, spark_cluster, s3_server, tmp_path):
    """chaos --cluster: three fault points (the crash test above fires every one on the cluster), a
    Spark worker killed with its executor, the S3 server and the broker killed and restarted,
    while the input arrives; then the independent read_committed check. It runs on the suite's
    cluster and S3 server (chaos.run's `cluster`), which `chaos --cluster` starts of its own."""
    parser = argparse.ArgumentParser()
    chaos.add_arguments(parser)
    args = parser.parse_args(["--profile", "smoke", "--seed", "1", "--cluster", "--workdir", str(tmp_path)])
    out = io.StringIO()
    code = chaos.run(args, kafka=kafka, out=out, cluster=(spark_cluster, s3_server))
    output = out.getvalue()
    print(output)
    verdict = chaos.VERDICT_LINE.match(output.strip().splitlines()[-1])
    assert verdict, output[-3000:]
    assert int(verdict["faults"]) == PROFILES["smoke"].fault_points, output
    assert "SIGKILL of Spark worker" in output and "S3 server serving again" in output, output
    assert "unexpected_exits=0" in output, output  # the clean run stopped cleanly under spark-submit too
    if kafka.restart_broker is not None:  # the env provider cannot restart a broker it did not start
        assert int(verdict["broker_restarts"]) >= 1, output
    assert (verdict["lost"], verdict["duplicated"], verdict["dead_letter_ok"]) == ("0", "0", "true"), output
    assert code == 0, output
