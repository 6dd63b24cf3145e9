"""The job publishes the same records from the same input: two runs, each on a checkpoint, sink id
and output topics of its own, read one input with the same batch plan (every event produced
before either starts, the same max_offsets_per_trigger), and what each published must be equal
batch by batch, record by record (the differential oracle's strict comparison, tools'
differential.py). The exactly-once guarantee leans on it: a batch that Spark runs again after a
crash must give the records its first attempt gave, or its shards would publish two
computations. The check knows nothing of the query: it holds for whatever the job computes, and a
query that is not deterministic fails it, naming the first record that differs."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}_tools.differential import read_run

from harness import CONFIG, JobUnderTest, produce_sample

pytestmark = pytest.mark.integration


def run_twice(job: JobUnderTest, **options: str) -> str | None:
    produce_sample(job, count=2000, seed=31, partitions=4)
    completed = job.run(max_offsets_per_trigger="500", **options)
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert len({record.batch for record in read_run(job.bootstrap_servers, job.output_topic,
                                                    job.dead_letter_topic)}) >= 4  # several batches compared
    comparison = job.compare_with_reference(max_offsets_per_trigger="500", **options)
    assert comparison.same_plan
    return comparison.difference


def test_the_job_publishes_the_same_records_from_the_same_input(job):
    assert (difference := run_twice(job)) is None, difference


def test_a_query_that_is_not_deterministic_fails_the_check_at_its_first_differing_record(job):
    """The check has teeth: the configured filter with `rand()` added keeps another subset of the
    events in each run, and the counts differ from the first batch on."""
    difference = run_twice(job, filter=f"({CONFIG.filter}) AND rand() < 0.8")
    assert difference is not None and "the first, in batch 0: " in difference, difference
