"""A driver started while Kafka is in an outage: two of the three brokers down, so fewer in sync
than min.insync.replicas and no controller quorum (admin requests time out "waiting for
controller", transactions cannot start). Its start-up checks and its first batch wait within
kafka_outage_tolerance_seconds and then run, exactly once; past the tolerance it exits in one
line, without a traceback."""

from __future__ import annotations

import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness import merged, produce_sample, stop, wait_until

pytestmark = [pytest.mark.kafka_cluster, pytest.mark.integration]


def _two_down(cluster) -> list[int]:
    down = sorted(cluster.nodes)[:2]
    for node_id in down:
        cluster.kill(node_id)
    return down


def _start_again(cluster, nodes: list[int]) -> None:
    with ThreadPoolExecutor() as pool:  # together: each waits for a quorum
        list(pool.map(cluster.start_node, nodes))


def test_a_driver_started_while_two_brokers_are_down_waits_then_runs_exactly_once(kafka_cluster, cluster_job):
    cluster, job = kafka_cluster, cluster_job
    sample = produce_sample(job, count=2000, seed=31, partitions=4)
    down = _two_down(cluster)
    try:
        process, log_path = job.start(kafka_outage_tolerance_seconds="240")
        # It waits, saying so, instead of failing: the start-up checks or the first batch.
        wait_until(lambda: "tolerance 240s" in log_path.read_text(), 120, "the job to say it waits for Kafka",
                   alive=process, log_path=log_path)
        time.sleep(10)
        assert process.poll() is None, log_path.read_text()[-3000:]
        _start_again(cluster, down)
        down = []
        assert process.wait(400) == 0, log_path.read_text()[-3000:]
    finally:
        if down:
            _start_again(cluster, down)
        if process.poll() is None:
            stop(process, signal.SIGKILL)
    log = log_path.read_text()
    assert "Traceback" not in log, log[-3000:]
    kept, malformed = merged(sample)
    verdict = job.verify(kept, malformed)
    assert verdict.exactly_once, verdict.problems


def test_past_the_tolerance_the_start_fails_in_one_line(kafka_cluster, cluster_job):
    cluster, job = kafka_cluster, cluster_job
    produce_sample(job, count=200, seed=37, partitions=4)
    down = _two_down(cluster)
    try:
        result = job.run(kafka_outage_tolerance_seconds="15", restart_strategy="none", timeout=600)
    finally:
        _start_again(cluster, down)
    output = result.stdout
    assert result.returncode == 1, output[-3000:]
    assert "Traceback" not in output and "\tat " not in output, output[-3000:]
    last = output.strip().splitlines()[-1]
    # Past the tolerance at start-up, or (the checks through) past it in the first batch and then
    # past the restart strategy's attempts: either way one line that says so.
    assert last.startswith("error: ") and ("past kafka_outage_tolerance_seconds (15)" in last
                                           or last.startswith("error: giving up: ")), last
    # The job's own clock, not this test's: the outage it reports lasted the tolerance out.
    waited = [int(found[1]) for found in re.finditer(r"in an outage for (\d+)s", output)]
    assert last.startswith("error: giving up: ") or (waited and max(waited) >= 15), output[-3000:]
    published = job.published()
    assert not published.answers and not published.dead_letters, "a job that did not start published records"
