"""The job on a real broker: exact counts, dead letters, the input's headers where the query keeps
them, resuming from the checkpoint, the restart strategy, and configuration errors that name their
option."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import pytest

from {{ cookiecutter.package_name }}.pipeline import query
from {{ cookiecutter.package_name }}.pipeline.query import as_key
from {{ cookiecutter.package_name }}.savepoints import pinned_query
from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}_tools.readback import DEAD_LETTER, OUTPUT, Published
from {{ cookiecutter.package_name }}_tools.sample import SampleInput, sample_headers
from {{ cookiecutter.package_name }}_tools.value_formats import input_values
from {{ cookiecutter.package_name }}_tools.verify import verify

from harness import CONFIG, assert_stops_in_one_line, expectation, model, produce_sample

pytestmark = pytest.mark.integration

# Reasons the sample's malformed records get, per input format (up to the first colon).
MALFORMED = {"json": ("not JSON", "not a JSON object"), "avro": ("not in the registry's wire format",)}


def run_and_check_exact(job, sample, **options: str) -> Published:
    """Run the job to the end of its input; what it published must match the input exactly."""
    result = job.run(**options)
    assert result.returncode == 0, result.stdout
    published = job.published()
    expected, malformed = expectation(sample)
    verdict = verify(published, expected, malformed)
    assert verdict.exactly_once, verdict.problems
    assert expected.met_by(published)
    # One log line per batch with input, however quickly the batches follow each other.
    logged = [int(batch) for batch in re.findall(r"\bbatch (\d+): \d+ records in", result.stdout)]
    assert len(logged) == len(set(logged)), f"a batch logged twice: {logged}"
    published_batches = published.batches()
    assert published_batches <= set(logged), f"batches without their log line: {published_batches - set(logged)}"
    assert not (mismatches := job.batch_header_mismatches()), mismatches[:5]
    return published


@pytest.mark.fast
def test_counts_over_several_partitions_are_exact(job):
    sample = produce_sample(job, count=4000, seed=11, partitions=4)
    published = run_and_check_exact(job, sample, max_offsets_per_trigger="1500")  # at least three batches
    check_headers(job, sample, partitions=4)
    events = input_values(job.config())
    produced_keys = {as_key(events.event(v)[CONFIG.key_field]) for v in sample.values
                     if v not in sample.malformed_values}
    filtered_out = produced_keys - expectation(sample)[0].keys()
    assert not filtered_out & set(published.answers), f"the filter {CONFIG.filter!r} let keys through"
    batches = published.batches()
    assert len(batches) >= 3
    reasons = {d["reason"].split(":")[0] for d in published.dead_letters}
    assert {*MALFORMED[CONFIG.input_format], f"missing key field {CONFIG.key_field!r}"} <= reasons

    status = run_cli(job, command="status")
    assert status.returncode == 0, status.stderr
    last_committed = re.search(r"committed batches retained, last \[(\d+)\]", status.stdout)
    assert last_committed and int(last_committed.group(1)) >= max(batches), status.stdout
    if CONFIG.exactly_once:
        assert f"batch {max(batches)}: committed" in status.stdout
    else:
        assert "(at-least-once): no sink log" in status.stdout
    assert "input lag per partition" in status.stdout and "(total 0)" in status.stdout
    health = run_cli(job, command="status", flags=("--json", "--check", "--max-batch-age", "60", "--max-lag", "0"))
    report = json.loads(health.stdout)
    assert health.returncode == 0 and report["healthy"], health.stdout + health.stderr
    assert report["last_committed_batch"] >= max(batches) and report["lag_total"] == 0


def check_headers(job, sample: SampleInput, partitions: int) -> None:
    """Where the query keeps its input's headers (query.KEEPS_HEADERS), every output record carries
    those of the event it came from (the model's record for that event) and every dead letter those
    of its malformed record, in order, before the sink's batch_id; elsewhere no record carries any
    header but the sink's. The sample's headers are sample_headers(position), some records without."""
    records = job.read_run()
    if not query.KEEPS_HEADERS:
        carrying = [record for record in records if record.headers]
        assert not carrying, f"{len(carrying)} records carry headers besides the batch id, e.g. {carrying[0]}"
        return
    wanted: Counter[tuple[str, str, tuple]] = Counter()
    events = input_values(job.config())
    for position, value in enumerate(sample.values):
        headers = tuple(sample_headers(position) or ())
        if value in sample.counted_values:
            ((key, answer),) = model([events.event(value)])
            wanted[(OUTPUT, f"{key} {json.dumps(answer, sort_keys=True)}", headers)] += 1
        elif value in sample.malformed_values:
            wanted[(DEAD_LETTER, f"{position % partitions}@{position // partitions}", headers)] += 1
    found: Counter[tuple[str, str, tuple]] = Counter()
    for record in records:
        value = json.loads(record.value)
        value.pop("batch_id")
        what = (f"{record.key.decode()} {json.dumps(value, sort_keys=True)}" if record.role == OUTPUT
                else f"{value['source_partition']}@{value['source_offset']}")
        found[(record.role, what, record.headers)] += 1
    assert any(headers for _role, _what, headers in wanted), "the sample has no headers to keep"
    assert found == wanted, (f"records without their input's headers: {sorted((found - wanted).elements())[:3]}; "
                             f"expected: {sorted((wanted - found).elements())[:3]}")


def test_a_state_ttl_keeps_the_answer_through_the_python_operator(job):
    """state_ttl_seconds > 0 swaps Spark's aggregation for transformWithStateInPandas (counting.py):
    the same answers and dead letters, through the same sink. The TTL is longer than the run, so
    no key expires and the answers are exact against the model."""
    sample = produce_sample(job, count=1500, seed=5, partitions=2)
    run_and_check_exact(job, sample, max_offsets_per_trigger="600", state_ttl_seconds="3600")


def test_restart_resumes_from_the_checkpoint_without_rereading(job):
    """...and, for a query with state, refuses in one line to resume it with a query that computes
    something else (its record of the query, savepoints/pinned_query.py, says another one made
    it). A query without state pins nothing: a changed one goes on from the next batch."""
    first = produce_sample(job, count=1500, seed=21, partitions=4)
    assert job.run().returncode == 0
    after_first = job.published()
    assert expectation(first)[0].met_by(after_first)

    second = produce_sample(job, count=1000, seed=22, partitions=4)
    record = job.checkpoint / pinned_query.FILE
    if query.KEEPS_STATE:
        ours = record.read_bytes()
        record.write_text(json.dumps({"format": pinned_query.PINNED_FORMAT, "fingerprint": "0123456789abcdef"}))
        refused = job.run()
        assert refused.returncode == 2, refused.stdout[-3000:]
        assert_stops_in_one_line(refused.stdout, "error: configuration option 'checkpoint_location': ")
        assert "holds the state of another query (fingerprint 0123456789abcdef;" in refused.stdout
        assert job.published().batches() == after_first.batches()
        record.write_bytes(ours)
    else:
        assert not record.exists(), "a query without state pinned its fingerprint"
    result = job.run()
    assert result.returncode == 0, result.stdout
    published = job.published()
    expected, malformed = expectation(first, second)
    # Re-reading the first input would push every count above this.
    verdict = verify(published, expected, malformed)
    assert verdict.exactly_once, verdict.problems
    first_run_batches = after_first.batches()
    second_run_batches = published.batches() - first_run_batches
    assert min(second_run_batches) > max(first_run_batches)


def test_a_fault_variable_fires_nothing_in_a_production_start_and_only_the_tools_arm_it(job):
    """The crash tests' fault points are inert in the job's own command: a stray variable in a
    production environment is left alone, and the batch publishes. Armed by the tools' launcher
    (as every crash test starts the job), the same variables fail the batch, and the restart
    strategy restarts it, then gives up."""
    stray = {faults.POINT_VARIABLE: faults.BATCH_COMPUTED, faults.MODE_VARIABLE: "raise"}
    first = produce_sample(job, count=200, seed=31, partitions=4, malformed_rate=0)
    production = job.run(extra_env=stray, arm_faults=False)
    assert production.returncode == 0 and "fault injection" not in production.stdout, production.stdout[-3000:]
    assert "-m {{ cookiecutter.package_name }}_tools" not in " ".join(map(str, production.args))
    verdict = verify(job.published(), *expectation(first))
    assert verdict.exactly_once, verdict.problems
    produce_sample(job, count=200, seed=32, partitions=4, malformed_rate=0)
    result = job.run(extra_env=stray, restart_strategy="fixed-delay", restart_attempts="2", restart_delay_seconds="0.5")
    assert result.returncode != 0
    assert result.stdout.count("restarting the query in") == 2, result.stdout[-3000:]
    assert "giving up: 3 failures; restart_attempts is 2" in result.stdout
    assert "InjectedFault: fault injection: batch_computed in batch " in result.stdout


def run_cli(job, *settings: str, command: str = "run", flags: tuple[str, ...] = (), timeout: float = 120
            ) -> subprocess.CompletedProcess:
    arguments = [sys.executable, "-m", "{{ cookiecutter.package_name }}", command, *flags]
    for name, value in {**job.settings(), **dict(s.split("=", 1) for s in settings)}.items():
        arguments += ["--set", f"{name}={value}"]
    return subprocess.run(arguments, cwd=job.workdir, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("bootstrap_servers=127.0.0.1:1",
         "configuration option 'bootstrap_servers': Kafka at 127.0.0.1:1 did not answer"),
        ("input_topic=no-such-topic", "configuration option 'input_topic': topic 'no-such-topic' does not exist"),
        ("filter=color !=! 'x'", "configuration option 'filter'"),
        ("filter=no_such_column = 1", "configuration option 'filter'"),
        ("trigger_interval_seconds=soon", "configuration option 'trigger_interval_seconds': 'soon' is not a float"),
        ("delivery_guarantee=maybe", "configuration option 'delivery_guarantee'"),
    ],
)
def test_bad_configuration_fails_at_start_naming_the_option(job, setting, message):
    result = run_cli(job, setting)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_explicit_starting_offsets_in_sparks_form_skip_what_is_before_them(job):
    produce_sample(job, count=400, seed=41, partitions=4)  # 100 records in each partition, never counted
    counted = produce_sample(job, count=800, seed=42, partitions=4)
    offsets = json.dumps({job.input_topic: {str(partition): 100 for partition in range(4)}})
    result = job.run(starting_offsets=offsets)
    assert result.returncode == 0, result.stdout[-3000:]
    # Counts or dead letters of the skipped records would show as duplicated or as extra dead letters.
    verdict = verify(job.published(), *expectation(counted))
    assert verdict.exactly_once, verdict.problems
