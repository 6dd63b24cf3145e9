"""The job publishes the same records from the same input: two runs, each on a checkpoint, sink id
and output topics of its own, read one input with the same batch plan (every event produced
before either starts, the same max_offsets_per_trigger), and what each published must be equal
batch by batch, record by record (the differential oracle's strict comparison, tools'
differential.py). The exactly-once guarantee leans on it: a batch that Spark runs again after a
crash must give the records its first attempt gave, or its shards would publish two
computations. The check knows nothing of the query: it holds for whatever the job computes, and a
query that is not deterministic fails it, naming the first record that differs."""

from __future__ import annotations

import sys

import pytest

from {{ cookiecutter.package_name }}_tools.readback import read_records

from harness import JobUnderTest, produce_sample

pytestmark = pytest.mark.integration


def run_twice(job: JobUnderTest, **options: str) -> str | None:
    produce_sample(job, count=1200, seed=31, partitions=4)
    completed = job.run(max_offsets_per_trigger="300", **options)
    assert completed.returncode == 0, completed.stdout[-3000:]
    assert len({record.batch for record in read_records(job.bootstrap_servers, job.output_topic,
                                                    job.dead_letter_topic)}) >= 4  # several batches compared
    comparison = job.compare_with_reference(max_offsets_per_trigger="300", **options)
    assert comparison.same_plan
    return comparison.difference


def test_the_job_publishes_the_same_records_from_the_same_input(job):
    assert (difference := run_twice(job)) is None, difference


# A query made not deterministic without editing it: the job starts through a script that wraps
# the query, pairing each of its answer's values with an expression (any answer type: the
# output record's value carries the pair as a JSON object).
NOT_DETERMINISTIC = """
import sys

from pyspark.sql import functions as F

from {{ cookiecutter.package_name }}.cli import main
from {{ cookiecutter.package_name }}.pipeline import steps
from {{ cookiecutter.package_name }}.pipeline.changes import Changes, answer_names

computed = steps.changes
EXPRESSION = sys.argv.pop(1)  # what the launcher gave before the job's own arguments


def changes(events, config, seed=None):
    result = computed(events, config, seed)
    names = answer_names(result.frame.columns)
    frame = result.frame.select(*(F.struct(F.col(name).alias("answer"), F.expr(EXPRESSION).alias("noise")).alias(name)
                                  if name in names else name for name in result.frame.columns))
    return Changes(frame, result.output_mode, result.dead_letters_inline)


steps.changes = changes
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("expression", ["rand() * 1000", "unix_micros(current_timestamp())"])
def test_a_query_that_is_not_deterministic_fails_the_check_at_its_first_differing_record(job, expression):
    """The check has teeth: the answer with `rand()` or `current_timestamp()` beside it gives
    other values in each run, from the first batch on."""
    script = job.workdir / "not_deterministic.py"
    script.write_text(NOT_DETERMINISTIC)
    job.launcher = [sys.executable, str(script), expression]
    job.options["output_format"] = "json"  # the wrapped answer is no longer the one schemas/output.avsc holds
    difference = run_twice(job)
    assert difference is not None and "the first, in batch 0: " in difference, difference
