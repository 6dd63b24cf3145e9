"""The faults of a production-shaped Kafka (the session's kafka_cluster: three brokers, three
replicas, `min.insync.replicas=2`). The job runs exactly-once on it, paused at a step of its commit
protocol (fault mode pause) while a broker the batch in flight depends on is SIGKILLed, then let
go on: the batch must be published once, whole, and every count and dead letter judged exact by
the independent read_committed reader, batch by batch."""

from __future__ import annotations

import dataclasses
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}_tools.kafka_io import create_topics
from {{ cookiecutter.package_name }}_tools.kafka_local.cluster import LocalKafkaCluster
from {{ cookiecutter.package_name }}_tools.verify import Verdict

from harness import (
    PUBLISHED_BEFORE_THE_CRASH,
    JobUnderTest,
    assert_as_the_reference_run,
    crash_at_each_point,
    merged,
    produce_sample,
    stop,
    wait_until,
)

pytestmark = [pytest.mark.kafka_cluster, pytest.mark.integration]
RECORDS_PER_BATCH = 1000
PAUSED = re.compile(r"fault injection: pause at (\S+) in batch (\d+)")
PRODUCING, COMMITTING = faults.AFTER_LOG_ENTRY, faults.BEFORE_KAFKA_COMMIT  # phase 2: before its produce, its commit
Pause = tuple[int, str]  # (batch, point)


def _pauses(job: JobUnderTest) -> list[Pause]:
    return [(int(found[2]), found[1]) for line in job.fired_faults() if (found := PAUSED.search(line))]


def drive(job: JobUnderTest, process: subprocess.Popen, log_path: Path, actions: dict[Pause, Callable[[], None]],
          timeout: float = 400) -> dict[Pause, float]:
    """Until the job exits: at each pause, run its action (if any; it may release the pause
    itself), then release it. Returns when each pause was seen (monotonic seconds)."""
    seen: dict[Pause, float] = {}
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        if time.monotonic() > deadline:  # the wait's bound, generous: a job that hangs, not a slow one
            raise AssertionError(f"the job did not finish within {timeout:.0f}s; log: {log_path}")
        for pause in _pauses(job):
            if pause not in seen:
                seen[pause] = time.monotonic()
                if pause in actions:
                    actions[pause]()
                job.release(pause[1], pause[0])
        time.sleep(0.05)
    assert process.returncode == 0, log_path.read_text()[-3000:]
    assert set(actions) <= set(seen), f"the job never paused at {set(actions) - set(seen)}"
    return seen


HUNG_SECONDS = 45  # past the clients' request time-out (30 s), within the sink's commit time-out (60 s)


def test_brokers_killed_in_the_middle_of_the_sinks_commit_lose_and_double_nothing(
        kafka_cluster, cluster_job):
    """One job through four batches with a broker fault each, every batch's records judged:
    1. its records and marker produced, its transaction open: the leader of an output partition
       SIGKILLed, then the commit;
    2. (the broker back) the same point: the broker coordinating the sink's transaction SIGKILLed;
    3. (the broker back) before it produces: two of the three brokers SIGKILLed for 10 s, fewer
       in sync than min.insync.replicas and no controller quorum: the batch waits, or fails and
       runs again, and is never published in part (the verdict checks every batch's answers);
    4. (the brokers back) between its produce and its commit: the broker coordinating the sink's
       transaction hung (SIGSTOP, or its container paused: connections open, requests unanswered,
       unlike a kill's reset) for HUNG_SECONDS, past the clients' request time-out. The commit
       waits it out, or the batch fails and runs again; it is published once."""
    cluster = kafka_cluster
    job = cluster_job
    sample = produce_sample(job, count=RECORDS_PER_BATCH * 5, seed=11, partitions=4)
    transactional_id = f"{job.settings()['transactional_id_prefix']}-{job.sink_id}-0"
    killed: list[int] = []
    hung: list[int] = []

    def kill(*node_ids: int) -> None:
        for node_id in node_ids:
            cluster.kill(node_id)
            killed.append(node_id)

    def restart_killed() -> None:
        with ThreadPoolExecutor() as pool:  # two nodes, together: each waits for a quorum
            list(pool.map(cluster.start_node, killed))
        killed.clear()

    def below_min_insync() -> None:
        leader = cluster.leader(job.output_topic, 0)
        kill(leader, next(node_id for node_id in cluster.nodes if node_id != leader))
        job.release(PRODUCING, 3)  # the batch produces into a cluster of one
        time.sleep(10)
        restart_killed()

    def hang_the_coordinator() -> None:
        node_id = cluster.transaction_coordinator(transactional_id)
        cluster.hang(node_id)
        hung.append(node_id)
        threading.Timer(HUNG_SECONDS, cluster.resume, [node_id]).start()

    actions: dict[Pause, Callable[[], None]] = {
        (1, COMMITTING): lambda: kill(cluster.leader(job.output_topic, 0)),
        (2, PRODUCING): restart_killed,
        (2, COMMITTING): lambda: kill(cluster.transaction_coordinator(transactional_id)),
        (3, PRODUCING): lambda: (restart_killed(), below_min_insync()),
        (4, COMMITTING): hang_the_coordinator,
    }
    process, log_path = job.start(fault=f"{PRODUCING},{COMMITTING}", fault_batch=1, fault_mode="pause",
                                  max_offsets_per_trigger=str(RECORDS_PER_BATCH))
    try:
        seen = drive(job, process, log_path, actions, timeout=600)
    finally:
        restart_killed()
        for node_id in hung:
            cluster.resume(node_id)
    # How long a fault held the job up: from the faulted pause to the next batch's first pause
    # (its batch committed, Spark's commit written, the next batch computed).
    for fault, (batch, point) in (("output partition leader", (1, COMMITTING)),
                                  ("transaction coordinator", (2, COMMITTING)),
                                  ("two of three brokers", (3, PRODUCING))):
        print(f"{fault} SIGKILLed at {point} in batch {batch}: batch {batch + 1} computed "
              f"{seen[(batch + 1, PRODUCING)] - seen[(batch, point)]:.1f}s later")
    print(f"transaction coordinator {hung} hung for {HUNG_SECONDS}s at {COMMITTING} in batch 4: the job ended "
          f"{time.monotonic() - seen[(4, COMMITTING)]:.1f}s later")
    kept, malformed = merged(sample)
    verdict = job.verify(kept, malformed)
    assert verdict.exactly_once, verdict.problems
    assert_as_the_reference_run(job, max_offsets_per_trigger=str(RECORDS_PER_BATCH))


# A leader of an output partition hung past the sink's delivery time-out (message.timeout.ms, a
# client setting in the job's [kafka] table): records sent to it fail, the others are delivered.
LEADER_HUNG_SECONDS = 40
DELIVERY_TIMEOUT = {"kafka.message.timeout.ms": "15000", "restart_attempts": "10"}


def on_all_but_one_broker(cluster: LocalKafkaCluster, job: JobUnderTest) -> tuple[JobUnderTest, int]:
    """The job on topics of its own whose replicas keep off one broker, but for output partition 0,
    which that broker leads: hung, it holds up nothing else of the job's (its input, the other
    output partition and the dead letters have no replica there to wait for). Returns the job
    and that broker."""
    hung, *others = sorted(cluster.nodes)
    away = [others, others[::-1]]  # two replicas each (a topic's partitions all have as many)
    topics = {"input_topic": [away[p % 2] for p in range(4)], "output_topic": [[hung, others[0]], others],
              "dead_letter_topic": [others]}
    names = {option: f"{option.split('_')[0]}-{uuid.uuid4().hex[:10]}" for option in topics}
    create_topics(cluster.bootstrap_servers, {names[option]: replicas for option, replicas in topics.items()})
    return dataclasses.replace(job, **names), hung


def hang_a_leader_under_the_next_batch(cluster: LocalKafkaCluster, job: JobUnderTest) -> tuple[Verdict, str, str]:
    """Batch 2 computed, nothing of it on Kafka yet (both sinks pass AFTER_LOG_ENTRY before they
    produce), the leader of output partition 0 hangs for LEADER_HUNG_SECONDS; the batch publishes
    into it. The verdict, batch by batch, the job's log, and what the job logged after the leader
    was resumed."""
    job, leader = on_all_but_one_broker(cluster, job)
    sample = produce_sample(job, count=RECORDS_PER_BATCH * 4, seed=13, partitions=4)
    hung: list[int] = []
    resumed_at: list[int] = []  # the log's length when the leader answered again

    def resume_the_leader() -> None:
        cluster.resume(leader)
        resumed_at.append(log_path.stat().st_size)

    def hang_the_leader() -> None:
        cluster.hang(leader)
        hung.append(leader)
        threading.Timer(LEADER_HUNG_SECONDS, resume_the_leader).start()

    process, log_path = job.start(fault=faults.AFTER_LOG_ENTRY, fault_batch=2, fault_mode="pause",
                                  max_offsets_per_trigger=str(RECORDS_PER_BATCH), **DELIVERY_TIMEOUT)
    try:
        drive(job, process, log_path, {(2, faults.AFTER_LOG_ENTRY): hang_the_leader}, timeout=600)
    finally:
        for node_id in hung:
            cluster.resume(node_id)
    output = log_path.read_text()
    return job.verify(*merged(sample)), output, output[resumed_at[0]:] if resumed_at else ""


def test_a_leader_hung_under_a_batch_in_flight_holds_it_up_and_it_is_published_once(kafka_cluster, cluster_job):
    """The exactly-once sink's transaction waits the hang out (its records in flight to the hung
    leader are not expired while their request is unanswered) and commits, or the batch fails and
    runs again: either way the batch is published once."""
    verdict, output, after_resume = hang_a_leader_under_the_next_batch(kafka_cluster, cluster_job)
    # Held up: batch 2 committed only once the leader answered again (the order of events in
    # the job's log, not anyone's clock).
    held_up = re.search(r"batch 2: \d+ records in \d+ ms", after_resume)
    assert "restarting the query" in output or held_up, \
        f"batch 2 was neither held up nor failed: the hang proved nothing\n{output[-3000:]}"
    assert verdict.exactly_once, verdict.problems


def test_the_same_hung_leader_duplicates_with_the_at_least_once_sink(kafka_cluster, cluster_job):
    """The counter-proof: the at-least-once sink's records to the hung leader time out, the batch
    fails, and the records it had delivered to partition 1 are delivered again when it runs again."""
    cluster_job.guarantee = "at-least-once"
    verdict, output, _ = hang_a_leader_under_the_next_batch(kafka_cluster, cluster_job)
    assert "restarting the query" in output, f"batch 2 did not fail: the hang proved nothing\n{output[-3000:]}"
    assert verdict.duplicated > 0 and not verdict.exactly_once, verdict


def test_the_driver_killed_at_each_point_of_the_commit_protocol_on_three_brokers(cluster_job):
    """The local suite's crash test (harness.crash_at_each_point) on the cluster: markers and
    transactions on three replicas, the coordinator on one of three brokers, phase 2 in Spark tasks."""
    job = cluster_job
    verdict, crashes = crash_at_each_point(job, faults.POINTS, seed=23, publish_from="tasks")
    for crash in crashes:
        assert crash.visible == (crash.fault in PUBLISHED_BEFORE_THE_CRASH), crash
    assert verdict.exactly_once, verdict.problems


def test_a_rolling_restart_of_the_three_brokers_while_the_job_runs(kafka_cluster, cluster_job):
    """Each broker in turn stopped as an operator stops it (SIGTERM: a controlled shutdown that
    moves its leaderships away) and started again, while the job works through a backlog of small
    batches: every batch published once, the verdict exact batch by batch."""
    cluster = kafka_cluster
    job = cluster_job
    sample = produce_sample(job, count=20_000, seed=29, partitions=4)
    process, log_path = job.start(max_offsets_per_trigger="250")
    try:
        wait_until(lambda: "batch 0:" in log_path.read_text(), 180, "the first batch", alive=process,
                   log_path=log_path)
        for node_id, node in cluster.nodes.items():
            node.stop()
            cluster.start_node(node_id)
        assert process.poll() is None, "the job finished before the rolling restart did: it proves nothing"
        assert process.wait(400) == 0, log_path.read_text()[-3000:]
    finally:
        if process.poll() is None:
            stop(process, signal.SIGKILL)
    kept, malformed = merged(sample)
    verdict = job.verify(kept, malformed)
    assert verdict.exactly_once, verdict.problems
