"""Crash the job for real at every step of the commit protocol, restart it from the
checkpoint, and check what a read_committed consumer sees against the input.

The same tests against the at-least-once sink must see duplicates: that is the proof
that the check can fail."""

from __future__ import annotations

import json
import random
import signal
import time
import zlib

import pytest

from {{ cookiecutter.package_name }}.pipeline import query
from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}_tools.kafka_io import grow_topic
from {{ cookiecutter.package_name }}_tools.readback import SETTLE_SECONDS, read_published
from {{ cookiecutter.package_name }}_tools.sample import {% if cookiecutter.query == "windowed-count" %}event_times, {% endif %}events_of_keys, produce
from {{ cookiecutter.package_name }}_tools.value_formats import input_values

from harness import (
    CONFIG,
    PUBLISHED_BEFORE_THE_CRASH,
    assert_stops_in_one_line,
    crash_at_each_point,
    merged,
    produce_sample,
    stop,
    wait_until,
)

pytestmark = pytest.mark.integration

FAULT_BATCH = 1  # the second batch: the first one is committed before the crash


@pytest.fixture(autouse=True)
def _exactly_once(job):
    """These tests prove the exactly-once sink, whichever guarantee the template's answer made the default."""
    job.guarantee = "exactly-once"


def crash_and_recover(job, fault: str, **options: str):
    # A seed per fault that stays the same from run to run (str hashes change with every process).
    sample = produce_sample(job, count=3000, seed=zlib.crc32(fault.encode()) % 1000, partitions=4)
    crashed = job.run(fault=fault, fault_batch=FAULT_BATCH, max_offsets_per_trigger="1000", **options)
    assert crashed.returncode == -signal.SIGKILL, f"the fault did not kill the job:\n{crashed.stdout[-3000:]}"
    # Both sink tasks of the batch may reach the point before the SIGKILL lands: same line, twice.
    assert set(job.fired_faults()) == {f"fault injection: SIGKILL at {fault} in batch {FAULT_BATCH}"}

    # Before the Kafka commit the crashed batch's transaction is left open: nothing to wait for.
    at_crash = job.published(settle=SETTLE_SECONDS if fault in PUBLISHED_BEFORE_THE_CRASH else 0)
    batches_at_crash = at_crash.batches()

    recovered = job.run(max_offsets_per_trigger="1000", **options)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    comparison = job.compare_with_reference(max_offsets_per_trigger="1000", **options)
    assert comparison.same_plan, "the reference run planned other batches"
    return job.verify(*merged(sample)), batches_at_crash, comparison


# Every point with phase 2 in Spark tasks (the points of steps 3 and 4 fire in a publishing task,
# which kills the driver); those two again with phase 2 on the driver, the only points whose code
# differs between the two (the others are the driver's, wherever phase 2 runs).
CRASHES = [*((point, "tasks") for point in faults.POINTS),
           (faults.BEFORE_KAFKA_COMMIT, "driver"), (faults.AFTER_KAFKA_COMMIT, "driver")]


@pytest.fixture
def crash_points(named_crash_points: tuple[str, ...]) -> list[tuple[str, str]]:
    """CRASHES, or those of the points that `--crash-points` names."""
    return [crash for crash in CRASHES if crash[0] in named_crash_points]


def test_exactly_once_through_a_crash_at_each_point_of_the_commit_protocol(job, crash_points):
    """SIGKILL at every step of the protocol, one after the other on one checkpoint
    (harness.crash_at_each_point), in the publishing tasks and on the driver (CRASHES). No output
    of a crashed batch is visible before its Kafka commit; after it, all of it is; in the end
    nothing is lost or doubled, batch by batch."""
    verdict, crashes = crash_at_each_point(job, crash_points, seed=17)
    for crash in crashes:
        assert crash.visible == (crash.fault in PUBLISHED_BEFORE_THE_CRASH), crash
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated, verdict.wrong_answers, verdict.missing_updates) == (0, 0, 0, 0)
    if any(point == faults.WRITING_SPARK_COMMIT for point, _ in crash_points):
        torn = next(crash.batch for crash in crashes if crash.fault == faults.WRITING_SPARK_COMMIT)
        assert list((job.checkpoint / "commits").glob(f".{torn}.*.tmp"))  # the torn commit file the restart met


@pytest.mark.fast
def test_a_crash_between_two_shards_commits_publishes_the_second_shard_once(job):
    """commit_shards=2: the job dies after shard 0 committed batch 1, before shard 1 did. The
    re-run must publish shard 1's part only: shard 0's marker says 1, shard 1's says 0."""
    verdict, batches_at_crash, comparison = crash_and_recover(job, faults.AFTER_KAFKA_COMMIT, commit_shards="2")
    assert FAULT_BATCH in batches_at_crash
    assert verdict.exactly_once, verdict.problems
    assert comparison.difference is None, comparison.difference


def test_the_same_crash_duplicates_with_the_at_least_once_sink(job):
    """The counter-proof, once: the crash after the Kafka commit (the at-least-once sink's records
    are visible at every fault point after the produce, so one point shows what all would). Both
    oracles see the duplicates: the query's model and the differential one."""
    job.guarantee = "at-least-once"
    verdict, _, comparison = crash_and_recover(job, faults.AFTER_KAFKA_COMMIT)
    assert verdict.duplicated > 0, "the at-least-once sink published no duplicate: the check has no teeth"
    assert not verdict.exactly_once
    assert comparison.difference is not None and "records published that the reference run did not publish" \
        in comparison.difference, comparison.difference
    assert not (mismatches := job.batch_header_mismatches()), mismatches[:5]  # its records carry the header too


@pytest.mark.parametrize("spark_master", ["local[2]", "local[2,2]"])
def test_a_publishing_task_killed_in_the_middle_of_its_transaction_leaves_its_shard_published_once(job, spark_master):
    """Phase 2 in Spark tasks, two commit shards: a publishing task's Python worker is killed
    with its transaction open, its records and marker on the broker, while the rest of the job
    lives (what an executor lost in the middle of a shard's transaction leaves). With local[2],
    Spark fails the batch and the runner restarts the query; with local[2,2], Spark retries the
    task, whose init_transactions aborts the dead attempt's transaction. Either way nothing is
    lost or doubled."""
    sample = produce_sample(job, count=3000, seed=5, partitions=4)
    run = job.run(fault=faults.BEFORE_KAFKA_COMMIT, fault_batch=FAULT_BATCH,
                  extra_env={faults.MODE_VARIABLE: "kill_task"}, max_offsets_per_trigger="1000",
                  publish_from="tasks", commit_shards="2", spark_master=spark_master)
    assert run.returncode == 0, run.stdout[-3000:]
    fired = job.fired_faults()
    assert fired and set(fired) == {f"fault injection: SIGKILL at {faults.BEFORE_KAFKA_COMMIT} in batch "
                                    f"{FAULT_BATCH}{faults.TASK_ONLY}"}, fired
    assert ("restarting the query" in run.stdout) is (spark_master == "local[2]"), run.stdout[-3000:]
    kept, malformed = merged(sample)
    verdict = job.verify(kept, malformed)
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated, verdict.wrong_answers, verdict.missing_updates) == (0, 0, 0, 0)


def test_a_batch_past_the_drivers_result_limit_is_published_by_tasks_once_through_a_crash(job):
    """A flood of 50 KB dead letters makes batches 0 and 1 larger than spark.driver.maxResultSize
    (1m here). With publish_from = "driver", collecting batch 0's dead letters on the driver fails,
    so Spark tasks publish the batch, one per commit shard (two: the shuffle that routes each
    shard to its task; one shard's single task is the crash-at-each-point test's). The job is
    killed after phase 1, before the Kafka transactions; the re-run publishes the batch once.
    Neither run logs a stack trace."""
    flood = [b"not json " + bytes([65 + i % 26]) * 50_000 + str(i).encode() for i in range(120)]
    produce(job.bootstrap_servers, job.input_topic, flood, partitions=4)
    sample = produce_sample(job, count=300, seed=21, partitions=4)
    options = {"max_offsets_per_trigger": "60", "commit_shards": "2", "publish_from": "driver",
               "spark": json.dumps({"spark.driver.maxResultSize": "1m"})}

    crashed = job.run(fault=faults.BATCH_COMPUTED, fault_batch=0, **options)
    assert crashed.returncode == -signal.SIGKILL, f"the fault did not kill the job:\n{crashed.stdout[-3000:]}"
    assert job.published().dead_letters == []

    recovered = job.run(**options)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    # The fallback's one line, no stack trace of Spark's: the read-back's, or the output's where the
    # dead letters travel with the records (the stateless query: no read-back).
    part = "read-back" if query.KEEPS_STATE else "output"
    for run in (crashed, recovered):
        assert f"batch 0: its {part} exceeds spark.driver.maxResultSize; Spark tasks publish it" in run.stdout, \
            run.stdout[-3000:]
        assert "\tat org.apache" not in run.stdout and "Traceback" not in run.stdout, run.stdout[-3000:]
    kept, malformed = merged(sample)
    verdict = job.verify(kept, malformed + flood)
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated, verdict.wrong_answers, verdict.missing_updates) == (0, 0, 0, 0)


def test_a_hundred_thousand_keys_through_a_crash_after_the_kafka_commit(job):
    """State at scale: 100,000 distinct keys, each twice, in batches of 60,000 records; the job
    is killed after batch 1's Kafka commit, before Spark's commit. The re-run publishes nothing,
    every key's last count is 2 and no count appears twice (the same crash with the at-least-once
    sink publishes the batch again, which this check sees: test_the_same_crash_duplicates_...)."""
    keys = [f"user-{i}" for i in range(100_000)]
    events = events_of_keys(keys * 2, 100, CONFIG.schema, CONFIG.key_field
                            {%- if cookiecutter.query == "windowed-count" %}, event_times(CONFIG){% endif %})
    random.Random(100).shuffle(events)
    event_value = input_values(job.config()).event_value  # the job file's format
    values = [event_value(event) for event in events]
    produce(job.bootstrap_servers, job.input_topic, values, partitions=4)
    job.counted_values |= set(values)  # the run's filter is "true"
    options = {"max_offsets_per_trigger": "60000", "filter": "true"}

    crashed = job.run(fault=faults.AFTER_KAFKA_COMMIT, fault_batch=FAULT_BATCH, **options)
    assert crashed.returncode == -signal.SIGKILL, f"the fault did not kill the job:\n{crashed.stdout[-3000:]}"
    recovered = job.run(**options)
    assert recovered.returncode == 0, recovered.stdout[-3000:]

    verdict = job.verify(events, [])
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated, verdict.wrong_answers, verdict.missing_updates) == (0, 0, 0, 0)


def test_published_output_reads_back_through_read_committed_only(job):
    """Sanity: the readback used above really is read_committed (an aborted record is invisible)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": job.bootstrap_servers, "transactional.id": f"abort-{job.sink_id}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(job.output_topic, key=b"red", value=b'{"key": "red", "count": 99, "batch_id": 99}')
    producer.flush(30)
    producer.abort_transaction(30)
    assert read_published(job.bootstrap_servers, job.output_topic, job.dead_letter_topic).answers == {}


def test_a_fenced_job_stops_for_good_and_the_newer_one_finishes_exactly_once(job, tmp_path):
    """A newer instance on the same sink id fences the running job: the fenced one must stop
    (exit 1, no restart by its restart strategy, which would fence the newer one in turn; its
    last line says so, with no traceback or stack trace above it), and
    the newer one, on the same checkpoint, finishes the input with nothing lost or doubled."""
    import threading

    from {{ cookiecutter.package_name }}.sink.producers import CommitShard
    from {{ cookiecutter.package_name }}.sink.settings import SinkSettings

    first = produce_sample(job, count=2000, seed=11, partitions=4)
    outcome = {}
    running = threading.Thread(target=lambda: outcome.update(old=job.run(until_idle=40, max_offsets_per_trigger="500")))
    running.start()
    commits = job.checkpoint / "commits"
    wait_until(lambda: commits.exists() and any(commits.iterdir()), 240, "a batch committed")
    settings = SinkSettings(bootstrap_servers=job.bootstrap_servers, checkpoint=str(job.checkpoint),
                            sink_id=job.sink_id, transactional_id_prefix="test", marker_topic=job.marker_topic,
                            shards=1, commit_timeout_seconds=30, client={})
    CommitShard(settings, 0).producer.flush(0)  # a newer instance's init_transactions: the running job is fenced
    second = produce_sample(job, count=2000, seed=12, partitions=4)
    running.join(300)
    old = outcome["old"]
    assert old.returncode == 1, f"the fenced job did not stop with status 1:\n{old.stdout[-3000:]}"
    assert "ProducerFenced" in old.stdout and "restarting the query" not in old.stdout, old.stdout[-3000:]
    assert_stops_in_one_line(old.stdout, "error: stopping: ")  # no traceback above it: Spark's and py4j's at debug

    newer = job.run(max_offsets_per_trigger="500")
    assert newer.returncode == 0, newer.stdout[-3000:]
    kept, malformed = merged(first, second)
    verdict = job.verify(kept, malformed)
    assert verdict.exactly_once, verdict.problems


def test_a_crash_right_after_the_input_topic_grows_loses_and_doubles_nothing(job):
    """The input topic gains two partitions while the job works through a backlog, events arrive
    on them, and the driver is SIGKILLed a moment later: the restarted job reads the new
    partitions from their start (as the killed one may have begun to), each event once."""
    first = produce_sample(job, count=3000, seed=71, partitions=4)
    process, log_path = job.start(max_offsets_per_trigger="500", until_idle=20)
    try:
        wait_until(lambda: "batch 1:" in log_path.read_text(), 240, "two batches", alive=process, log_path=log_path)
        grown = grow_topic(job.bootstrap_servers, job.input_topic, more=2)
        second = produce_sample(job, count=2000, seed=72, partitions=grown)
        time.sleep(random.Random(71).uniform(0.5, 2.0))
        assert process.poll() is None, "the job ended before the crash: it proves nothing"
    finally:
        stop(process, signal.SIGKILL)
    result = job.run(max_offsets_per_trigger="2000")
    assert result.returncode == 0, result.stdout[-3000:]
    verdict = job.verify(*merged(first, second))
    assert verdict.exactly_once, verdict.problems
