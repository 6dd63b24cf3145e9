"""A broker outage is not a failure: the broker is SIGKILLed in the middle of a run and kept down
for 30 s; the job, whose restart strategy allows no failure at all, waits, resumes by itself when
the broker is back, and publishes every count and dead letter exactly once. Its liveness probe
(`status --check`) stays green meanwhile: the outage is within kafka_outage_tolerance_seconds."""

from __future__ import annotations

import time

import pytest

from {{ cookiecutter.package_name }}.storage import checkpoint
from {{ cookiecutter.package_name }}_tools.kafka_io import create_topics
from {{ cookiecutter.package_name }}_tools.kafka_local import LocalKafkaBroker
from {{ cookiecutter.package_name }}_tools.processes import start_job
from {{ cookiecutter.package_name }}_tools.verify import verify

from harness import EXACTLY_ONCE, JobUnderTest, expectation, produce_sample, stop, wait_until

pytestmark = pytest.mark.integration

OUTAGE_SECONDS = 30


@pytest.fixture
def own_broker(tmp_path):
    """A broker of this test's own (the session's is shared): killed and started on the same data."""
    broker = LocalKafkaBroker(tmp_path / "kafka")
    broker.start()
    yield broker
    broker.stop()


def test_the_job_rides_out_a_broker_outage_and_stays_exact(own_broker, tmp_path, event_filter, format_options):
    bootstrap = own_broker.bootstrap_servers
    create_topics(bootstrap, {"events": 4, "counts": 2, "dead": 1})
    job = JobUnderTest(bootstrap, tmp_path, "events", "counts", "dead", event_filter, guarantee=EXACTLY_ONCE,
                       options=format_options)
    # No restart allowed: a failure that the runner counted would end the job.
    job.options.update(restart_strategy="none", max_offsets_per_trigger="500", trigger_interval_seconds="1")
    before = produce_sample(job, count=4000, seed=37, partitions=4)
    log_path = tmp_path / "outage.log"
    process = start_job(["run"], job.settings(), tmp_path, log_path)
    try:
        wait_until(lambda: len(checkpoint.committed_batches(job.checkpoint_location)) >= 2, 240,
                   "two batches committed", interval=0.2, alive=process, log_path=log_path)

        own_broker.kill()  # SIGKILL, in the middle of the backlog
        down_until = time.monotonic() + OUTAGE_SECONDS
        time.sleep(10)
        probe = job.health(max_batch_age=2)  # no batch for 10 s and no lag figure: the outage explains both
        assert probe["healthy"] and probe["lag_total"] is None and probe["driver"] is not None, probe
        while time.monotonic() < down_until:
            assert process.poll() is None, f"the job exited during the outage: {log_path.read_text()[-3000:]}"
            time.sleep(0.5)
        own_broker.start()
        after = produce_sample(job, count=1000, seed=38, partitions=4)

        expected, malformed = expectation(before, after)

        def all_published() -> bool:
            published = job.published()
            return expected.met_by(published) and len(published.dead_letters) >= len(malformed)

        wait_until(all_published, 300, "all published after the outage", interval=1, alive=process,
                   log_path=log_path)
    finally:
        stopped = stop(process)
    log = log_path.read_text()
    assert stopped == 0 and "Traceback" not in log, log[-3000:]  # SIGTERM to the group: a clean stop between batches
    assert "Kafka unreachable" in log and "Kafka answers again" in log, log[-3000:]
    # One line of the runner's every few seconds, not the clients' own several a second.
    assert log.count("Connection refused") + log.count("could not be established") <= 3, log[-3000:]
    assert "giving up" not in log and "restarting the query" not in log, log[-3000:]
    verdict = verify(job.published(), expected, malformed)
    assert verdict.exactly_once, verdict.problems
