"""Avro in and out, in the schema registry's wire format, against a real registry (Apicurio, the
tools' schema_registry.py) and a real Kafka: the sample written and the answers read back with
confluent-kafka's own serializers, judged by the query's model.

- Every malformed kind is a dead letter with its reason, its raw bytes kept; an id the plan did
  not know costs one rebuild of the query, nothing of the batch published before it.
- The crashes, the oracles and the at-least-once counter-proof are the crash tests'
  (test_exactly_once.py): they speak the formats job.toml names, Avro in an Avro rendering.
- A producer moving to a new, compatible version of the input's subject in the middle of a run
  is read on, exactly, the registry down meanwhile (the job needs it only for the new id).
- The registry down at start is waited for within its tolerance, then the start fails in one line.
- An output schema that does not fit the answer, or that the registry refuses, stops the start
  in one line naming the option."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from confluent_kafka.schema_registry import Schema

from {{ cookiecutter.package_name }}_tools.sample import configured_sample
from {{ cookiecutter.package_name }}_tools.schema_registry import SchemaRegistry
from {{ cookiecutter.package_name }}_tools.value_formats import AvroValues, input_values

from harness import (
    PROJECT,
    JobUnderTest,
    assert_each_malformed_kind_is_its_dead_letter,
    assert_stops_in_one_line,
    merged,
    produce,
    produce_sample,
    registry_options,
    wait_until,
)

pytestmark = pytest.mark.integration

OUTPUT_SCHEMA = PROJECT / "schemas" / "output.avsc"


@pytest.fixture
def avro_job(job: JobUnderTest, schema_registry: SchemaRegistry) -> JobUnderTest:
    """The job reading and writing Avro under its topics' subjects (the topic name strategy),
    whatever job.toml's formats."""
    job.options.update({"input_format": "avro", "output_format": "avro", **registry_options(schema_registry.url)})
    return job



@pytest.mark.fast
def test_avro_in_and_out_is_exact_and_each_malformed_kind_is_a_dead_letter_with_its_reason(avro_job):
    sample = produce_sample(avro_job, count=1200, seed=3, partitions=4, malformed_rate=0.05)
    run = avro_job.run(max_offsets_per_trigger="400")
    assert run.returncode == 0, run.stdout[-3000:]
    verdict = avro_job.verify(*merged(sample))
    assert verdict.exactly_once, verdict.problems
    key = avro_job.config().key_field
    kinds = input_values(avro_job.config()).malformed(key)  # as the sample wrote them (the same bytes)
    subject = f"{avro_job.input_topic}-value"
    expected = [
        "not in the registry's wire format: magic byte 0x7B, not 0x00",
        "not in the registry's wire format: 3 bytes, shorter than its 5-byte header",
        "unknown schema id 2147483641",
        "body does not decode with schema id ",
        f"schema id {int.from_bytes(kinds[4][1:5], 'big')} is not a version of subject {subject!r}",
        f"missing key field {key!r}",
    ]
    assert_each_malformed_kind_is_its_dead_letter(avro_job, kinds, expected, run.stdout)


def test_an_output_schema_that_does_not_fit_the_answer_stops_the_start_in_one_line(avro_job, tmp_path):
    wrong = json.loads(OUTPUT_SCHEMA.read_text())
    wrong["fields"] = [field for field in wrong["fields"] if field["name"] != "batch_id"]
    path = tmp_path / "wrong.avsc"
    path.write_text(json.dumps(wrong))
    produce_sample(avro_job, count=10, seed=1, partitions=4, malformed_rate=0.0)
    run = avro_job.run(output_schema=str(path))
    assert run.returncode == 2, run.stdout[-3000:]
    assert_stops_in_one_line(run.stdout, "error: configuration option 'output_schema': ")



def test_an_output_schema_the_registry_refuses_or_lacks_stops_the_start_in_one_line(avro_job, schema_registry):
    """`register`: a schema the registry calls incompatible with the subject's versions (BACKWARD
    there); `existing`: a schema not registered under the subject. Nothing is published."""
    produce_sample(avro_job, count=10, seed=5, partitions=4, malformed_rate=0.0)
    absent = avro_job.run(output_schema_registration="existing")
    assert absent.returncode == 2, absent.stdout[-3000:]
    assert_stops_in_one_line(absent.stdout, "error: configuration option 'output_schema_registration': ")
    client = schema_registry.client()
    subject = f"{avro_job.output_topic}-value"
    client.set_compatibility(subject_name=subject, level="BACKWARD")
    before = {"type": "record", "name": "counts", "fields": [{"name": "key", "type": "long"}]}
    client.register_schema(subject, Schema(json.dumps(before), "AVRO"))
    refused = avro_job.run()
    assert refused.returncode == 2, refused.stdout[-3000:]
    assert_stops_in_one_line(refused.stdout, "error: configuration option 'output_schema': ")
    assert "refuses it under subject" in refused.stdout.splitlines()[-1], refused.stdout[-3000:]
    assert avro_job.published(settle=0).records() == 0

@pytest.fixture
def registry_back(schema_registry: SchemaRegistry) -> Iterator[SchemaRegistry]:
    """The session's registry, started again after a test that stops it (its schemas kept)."""
    yield schema_registry
    if not schema_registry.answers():
        schema_registry.start()


def test_a_registry_down_at_start_is_waited_for_within_its_tolerance(avro_job, registry_back):
    """Past schema_registry_tolerance_seconds the start fails in one line naming the registry;
    within it, the job waits, then runs exactly once the registry is back."""
    sample = produce_sample(avro_job, count=600, seed=4, partitions=4)
    registry_back.stop()
    run = avro_job.run(schema_registry_tolerance_seconds="3")
    assert run.returncode == 2, run.stdout[-3000:]
    assert_stops_in_one_line(run.stdout, "error: configuration option 'schema_registry.url': ")
    assert "did not answer for" in run.stdout.splitlines()[-1], run.stdout[-3000:]
    with avro_job.running(max_offsets_per_trigger="300") as (process, log_path):
        wait_until(lambda: "(tolerance 120s)" in log_path.read_text(), 300, "the job waiting for the registry",
                   alive=process, log_path=log_path)
        registry_back.start()
        process.wait(400)
    assert process.returncode == 0, log_path.read_text()[-3000:]
    verdict = avro_job.verify(*merged(sample))
    assert verdict.exactly_once, verdict.problems


def test_a_producer_moving_to_a_new_version_in_the_middle_of_a_run_is_read_on_exactly(avro_job, registry_back):
    """v1 events; while the job runs, the registry goes down: with the ids known, the job reads on
    without it. Then v2 events (a field added, with a default: compatible), registered before the
    registry went down, as a producer registers before it writes: the job meets v2's id, its
    rebuild waits for the registry, then reads v1 and v2 alike, nothing lost or doubled."""
    first = produce_sample(avro_job, count=1500, seed=31, partitions=4)
    with avro_job.running(until_idle=6, max_offsets_per_trigger="500") as (process, log_path):
        wait_until(lambda: "batch 0:" in log_path.read_text(), 300, "the job's first batch", alive=process,
                   log_path=log_path)
        config = avro_job.config()
        v1 = AvroValues(config.schema_registry, f"{avro_job.input_topic}-value", dict(config.schema))
        v2 = AvroValues(config.schema_registry, v1.subject, dict(config.schema),
                        extra_fields=({"name": "note", "type": "string", "default": ""},))
        more_v1 = configured_sample(config, avro_job.keep, 600, seed=32, values=v1)  # written while it is up
        second = configured_sample(config, avro_job.keep, 900, seed=33, values=v2)  # registers v2
        assert v2.client.get_versions(v2.subject) == [1, 2]
        registry_back.stop()
        mark = len(log_path.read_text())
        produce(avro_job.bootstrap_servers, avro_job.input_topic, more_v1.values, partitions=4)
        avro_job.counted_values |= more_v1.counted_values
        wait_until(lambda: re.search(r"batch \d+: [1-9]\d* records", log_path.read_text()[mark:]), 300,
                   "a batch read without the registry", alive=process, log_path=log_path)
        produce(avro_job.bootstrap_servers, avro_job.input_topic, second.values, partitions=4)
        avro_job.counted_values |= second.counted_values
        wait_until(lambda: "(tolerance 120s)" in log_path.read_text()[mark:], 300,
                   "the rebuild waiting for the registry", alive=process, log_path=log_path)
        registry_back.start()
        process.wait(400)
    output = log_path.read_text()
    assert process.returncode == 0, output[-3000:]
    assert output[mark:].count("rebuilding the query: schema id") == 1, output[-3000:]
    verdict = avro_job.verify(*merged(first, more_v1, second))
    assert verdict.exactly_once, verdict.problems
