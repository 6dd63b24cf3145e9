"""A zombie driver: the running driver freezes (SIGSTOP of its process group: a long GC pause,
a stalled VM, a network partition) in the middle of a batch's commit, a second instance starts on
the same checkpoint as an orchestrator would start a replacement, and the first wakes up
(SIGCONT) while the second runs. The woken one must stop in one line without publishing anything
(the second's producers fenced its transactional ids; its heartbeat finds the newer driver's, and
it does not restart its query, which would fence the newer one back), and the second goes on.
The output stays exact, judged by the query's model and by a run without faults; the same
schedule with the at-least-once sink publishes the frozen batch twice."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable

import pytest

from {{ cookiecutter.package_name }}.sink import faults

from harness import assert_as_the_reference_run, assert_stops_in_one_line, merged, produce_sample, wait_until

pytestmark = pytest.mark.integration

FROZEN_BATCH = 1
OPTIONS = {"max_offsets_per_trigger": "1000", "publish_from": "tasks"}
BATCHES = 3  # the sample's 3000 events, 1000 a batch


@pytest.fixture(autouse=True)
def _exactly_once(job):
    job.guarantee = "exactly-once"


def freeze_and_replace(job, replaced: Callable[[], bool]) -> tuple[int, str, int, str]:
    """The first driver freezes in the middle of batch FROZEN_BATCH's commit, a second starts on
    the same checkpoint, and once `replaced()` holds the first wakes up. Returns each driver's exit
    status and log, the first's first."""
    zombie, zombie_log = job.start(fault=faults.BEFORE_KAFKA_COMMIT, fault_batch=FROZEN_BATCH, fault_mode="pause",
                                   **OPTIONS)
    paused = f"fault injection: pause at {faults.BEFORE_KAFKA_COMMIT} in batch {FROZEN_BATCH}"
    try:
        # Its records of the batch are on the broker (exactly-once: in its open transaction): it freezes there.
        wait_until(lambda: paused in job.fired_faults(), 240, "the first driver in the middle of batch 1's commit",
                   alive=zombie, log_path=zombie_log)
        os.killpg(zombie.pid, signal.SIGSTOP)
        # The orchestrator's new instance, on the same checkpoint: it runs the frozen batch again.
        replacement, replacement_log = job.start(until_idle=10, **OPTIONS)
        wait_until(replaced, 240, "the new driver published the frozen batch", alive=replacement,
                   log_path=replacement_log, interval=2)

        # A pause fires in every batch from FROZEN_BATCH on: the woken driver is let through those it
        # may start before it sees the newer one (at least once, nothing fences it in the frozen batch).
        for batch_id in range(FROZEN_BATCH, FROZEN_BATCH + BATCHES):
            job.release(faults.BEFORE_KAFKA_COMMIT, batch_id)
        os.killpg(zombie.pid, signal.SIGCONT)
        try:
            woken = zombie.wait(240)
            finished = replacement.wait(400)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"a driver did not stop; logs: {zombie_log}, {replacement_log}") from None
    finally:
        for process in (zombie, locals().get("replacement")):
            with contextlib.suppress(ProcessLookupError, AttributeError):
                os.killpg(process.pid, signal.SIGCONT)
                os.killpg(process.pid, signal.SIGKILL)
    return woken, zombie_log.read_text(), finished, replacement_log.read_text()


def test_a_driver_frozen_between_produce_and_commit_wakes_fenced_and_publishes_nothing(job):
    sample = produce_sample(job, count=3000, seed=61, partitions=4)
    woken, output, finished, replacement_output = freeze_and_replace(
        job, lambda: FROZEN_BATCH in job.published(settle=0).batches())
    assert woken == 1, output[-3000:]
    assert_stops_in_one_line(output, "error: stopping: a newer driver runs on ")
    assert finished == 0, replacement_output[-3000:]
    assert "restarting the query" not in output, output[-3000:]

    verdict = job.verify(*merged(sample))
    assert verdict.exactly_once, verdict.problems
    assert_as_the_reference_run(job, **OPTIONS)


def test_the_same_zombie_duplicates_with_the_at_least_once_sink(job):
    """The counter-proof: the at-least-once sink's records are visible before the freeze, and the
    replacement publishes the frozen batch again."""
    job.guarantee = "at-least-once"
    sample = produce_sample(job, count=3000, seed=61, partitions=4)
    freeze_and_replace(job, lambda: job.verify(*merged(sample)).duplicated > 0)
    verdict = job.verify(*merged(sample))
    assert verdict.duplicated > 0 and not verdict.exactly_once, verdict
