"""What the sink relies on, checked on a real broker with the job running for real: a checkpoint
older than the output is refused, never skipped past, even where an open transaction of another
producer on the marker topic hides the newer markers from the start-up check; and such a
transaction is waited out in place, not counted as a failure."""

from __future__ import annotations

import re
import shutil
import uuid

import pytest
from confluent_kafka import Producer

from {{ cookiecutter.package_name }}.sink.marker_topic import ensure_marker_topic
from {{ cookiecutter.package_name }}_tools.processes import start_job
from {{ cookiecutter.package_name }}_tools.readback import read_topic
from {{ cookiecutter.package_name }}_tools.verify import Expected

from harness import EXACTLY_ONCE, assert_stops_in_one_line, expectation, merged, produce_sample, stop, wait_until

pytestmark = pytest.mark.integration

FOREIGN_SINK = "another-sink"


@pytest.fixture(autouse=True)
def _exactly_once(job):
    job.guarantee = EXACTLY_ONCE


def open_foreign_transaction(job) -> Producer:
    """Another producer with a transaction open on the job's marker topic (a sibling sink that
    crashed mid-commit, a stuck tool), as its first record a marker of another sink."""
    ensure_marker_topic(job.bootstrap_servers, job.marker_topic)
    foreign = Producer({"bootstrap.servers": job.bootstrap_servers, "transactional.id": f"foreign-{uuid.uuid4().hex}"})
    foreign.init_transactions(30)
    foreign.begin_transaction()
    foreign.produce(job.marker_topic, key=f"{FOREIGN_SINK}/0".encode(), value=b'{"format": 1, "batch_id": 0}')
    foreign.flush(30)
    return foreign


WAITING = re.compile(r"the batch has waited (\d+)s for a transaction of another producer")


def run_in_background(job, name: str, **options: str):
    log_path = job.workdir / f"{name}.log"
    return start_job(["run", "--until-idle", "3"], {**job.settings(), **options}, job.workdir, log_path), log_path


def abort_once_waited(foreign: Producer, process, log_path, seconds: float, timeout: float = 300) -> list[str]:
    """Abort the foreign transaction once the job says it has waited `seconds` for it; its lines."""
    def waited() -> list[str]:
        lines = [line for line in log_path.read_text().splitlines() if WAITING.search(line)]
        return lines if lines and int(WAITING.search(lines[-1]).group(1)) >= seconds else []

    lines = wait_until(waited, timeout, f"a wait of {seconds:.0f}s for the foreign transaction", alive=process,
                       log_path=log_path)
    foreign.abort_transaction(30)
    return lines


def wait_until_published(job, expected: Expected, malformed: int, process, log_path, timeout: float = 240):
    def all_published() -> bool:
        published = job.published()
        return expected.met_by(published) and len(published.dead_letters) == malformed

    wait_until(all_published, timeout, "all published", interval=1, alive=process, log_path=log_path)


def test_an_older_checkpoint_copy_is_refused_even_behind_a_foreign_transaction_and_nothing_is_skipped(job, tmp_path):
    """The copy is taken from the running job while another producer holds a transaction open on
    the marker topic; the job then publishes more batches, whose markers that transaction hides
    from a read to the last stable offset (the start-up check's read). Restored, the copy passes
    the start-up check; its first batch waits for the foreign transaction to end, then sees the
    newer markers and refuses to run (status 2, naming checkpoint_location), publishing nothing.
    With the right checkpoint put back, every count is exact."""
    first = produce_sample(job, count=1500, seed=41, partitions=4)
    log_path = job.workdir / "running.log"
    process = start_job(["run", "--until-idle", "400"], job.settings(), job.workdir, log_path)
    try:
        expected, malformed = expectation(first)
        wait_until_published(job, expected, len(malformed), process, log_path)
        foreign = open_foreign_transaction(job)
        copy = tmp_path / "checkpoint-copy"
        shutil.copytree(job.checkpoint, copy, ignore=shutil.ignore_patterns("driver-heartbeat*", ".*"))
        second = produce_sample(job, count=1500, seed=42, partitions=4)
        expected, malformed = expectation(first, second)
        wait_until_published(job, expected, len(malformed), process, log_path)
    finally:
        assert stop(process) == 0, log_path.read_text()[-3000:]

    latest = tmp_path / "checkpoint-latest"
    job.checkpoint.rename(latest)
    copy.rename(job.checkpoint)
    third = produce_sample(job, count=1500, seed=43, partitions=4)
    before = len(read_topic(job.bootstrap_servers, job.output_topic))
    process, log_path = run_in_background(job, "refused")
    waits = abort_once_waited(foreign, process, log_path, seconds=5)
    assert all(f"sink '{FOREIGN_SINK}', shard 0" in line for line in waits), waits
    assert process.wait(240) == 2, f"the job did not refuse the older checkpoint: {log_path.read_text()[-3000:]}"
    refused = log_path.read_text()
    assert "'checkpoint_location'" in refused and "older than the output" in refused, refused[-3000:]
    assert "restarting the query" not in refused, refused[-3000:]
    assert_stops_in_one_line(refused, "error: configuration option 'checkpoint_location': ")
    assert len(read_topic(job.bootstrap_servers, job.output_topic)) == before, "the refused run published"

    shutil.rmtree(job.checkpoint)
    latest.rename(job.checkpoint)
    finished = job.run()
    assert finished.returncode == 0, finished.stdout[-3000:]
    verdict = job.verify(*merged(first, second, third))
    assert verdict.exactly_once, verdict.problems


def test_a_foreign_transaction_on_the_marker_topic_is_waited_out_then_the_batch_publishes_once(job):
    """Held open until the job has waited 35 s, longer than a settled read's 30 s, with
    restart_strategy none (the first failure would end the job): the job waits, says whose
    transaction holds the marker topic, and publishes every count exactly once after it ends."""
    sample = produce_sample(job, count=2000, seed=44, partitions=4)
    foreign = open_foreign_transaction(job)
    process, log_path = run_in_background(job, "waiting", restart_strategy="none")
    waits = abort_once_waited(foreign, process, log_path, seconds=35)
    assert all(f"sink '{FOREIGN_SINK}', shard 0" in line for line in waits), waits
    assert process.wait(240) == 0, log_path.read_text()[-3000:]
    assert "query failed" not in log_path.read_text(), log_path.read_text()[-3000:]
    verdict = job.verify(*merged(sample))
    assert verdict.exactly_once, verdict.problems
