"""The job publishes the same records from the same input: two runs, each on a checkpoint, sink id
and output topics of its own, read one input with the same batch plan (every event produced
before either starts, the same max_offsets_per_trigger), and what each published must be equal
batch by batch, record by record. The exactly-once guarantee leans on it: a batch that Spark runs
again after a crash must give the records its first attempt gave, or its shards would publish two
computations. The check knows nothing of the query: it holds for whatever the job computes, and a
query that is not deterministic fails it, naming the first record that differs."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

import pytest

from {{ cookiecutter.package_name }}_tools.readback import read_topic

from harness import CONFIG, JobUnderTest, produce_sample

pytestmark = pytest.mark.integration

Record = tuple[str, bytes, bytes]  # (which topic: output or dead-letter, key, value)


def twin_of(job: JobUnderTest, new_topic: Callable[..., str]) -> JobUnderTest:
    """The same job on the same input, with a checkpoint, sink id, markers and outputs of its own."""
    twin = JobUnderTest(
        bootstrap_servers=job.bootstrap_servers, workdir=job.workdir / "twin", input_topic=job.input_topic,
        output_topic=new_topic("counts", partitions=2), dead_letter_topic=new_topic("dead", partitions=1),
        keep=job.keep, guarantee=job.guarantee)
    twin.workdir.mkdir()
    return twin


def published_by_batch(job: JobUnderTest) -> dict[int, list[Record]]:
    """Every record a read_committed consumer sees, by the batch id its value carries."""
    batches: dict[int, list[Record]] = {}
    for role, topic in (("output", job.output_topic), ("dead-letter", job.dead_letter_topic)):
        for key, value in read_topic(job.bootstrap_servers, topic):
            batch = int(json.loads(value or b"{}")["batch_id"])
            batches.setdefault(batch, []).append((role, key or b"", value or b""))
    return {batch: sorted(records) for batch, records in batches.items()}


def first_difference(first: dict[int, list[Record]], second: dict[int, list[Record]]) -> str | None:
    """The first batch whose records differ between two runs, and its first differing record of each."""
    for batch in sorted(set(first) | set(second)):
        ours, theirs = Counter(first.get(batch, [])), Counter(second.get(batch, []))
        if ours != theirs:
            only_first, only_second = sorted((ours - theirs).elements()), sorted((theirs - ours).elements())
            return (f"batch {batch}: the first run published {only_first[0] if only_first else 'nothing more'}, "
                    f"the second {only_second[0] if only_second else 'nothing more'} "
                    f"({len(only_first)} and {len(only_second)} records of the batch differ)")
    return None


def run_twice(job: JobUnderTest, new_topic: Callable[..., str], **options: str) -> str | None:
    produce_sample(job, count=2000, seed=31, partitions=4)
    twin = twin_of(job, new_topic)
    for run in (job, twin):
        completed = run.run(max_offsets_per_trigger="500", **options)
        assert completed.returncode == 0, completed.stdout[-3000:]
    first = published_by_batch(job)
    assert len(first) >= 4, sorted(first)  # several batches compared, not one
    return first_difference(first, published_by_batch(twin))


def test_the_job_publishes_the_same_records_from_the_same_input(job, new_topic):
    assert (difference := run_twice(job, new_topic)) is None, difference


def test_a_query_that_is_not_deterministic_fails_the_check_at_its_first_differing_record(job, new_topic):
    """The check has teeth: the configured filter with `rand()` added keeps another subset of the
    events in each run, and the counts differ from the first batch on."""
    difference = run_twice(job, new_topic, filter=f"({CONFIG.filter}) AND rand() < 0.8")
    assert difference is not None and difference.startswith("batch 0: the first run published ('output'"), \
        difference
