"""Protobuf in and out, in the schema registry's wire format (the message indexes after the
header), against a real registry (Apicurio, the tools' schema_registry.py) and a real Kafka: the
sample written and the answers read back with confluent-kafka's own serializers, judged by the
query's model.

- Every malformed kind is a dead letter with its reason, its raw bytes kept: no header, a short
  value, a wrong magic byte, an unknown id, another subject's id, a body that does not decode, a
  message index the schema lacks, an event without its key.
- The crashes, the oracles and the at-least-once counter-proof are the crash tests'
  (test_exactly_once.py): they speak the formats job.toml names, Protobuf in a Protobuf rendering.
- A producer moving to a new, compatible version of the input's subject (a field added) in the
  middle of a run is read on, exactly, at the cost of one rebuild of the query.
- An output schema that does not fit the answer stops the start in one line naming the option."""

from __future__ import annotations

import re

import pytest

from {{ cookiecutter.package_name }}_tools.sample import configured_sample
from {{ cookiecutter.package_name }}_tools.schema_registry import SchemaRegistry
from {{ cookiecutter.package_name }}_tools.value_formats import ProtobufValues, input_values

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

OUTPUT_SCHEMA = PROJECT / "schemas" / "output.proto"


@pytest.fixture
def protobuf_job(job: JobUnderTest, schema_registry: SchemaRegistry) -> JobUnderTest:
    """The job reading and writing Protobuf under its topics' subjects (the topic name strategy),
    whatever job.toml's formats."""
    job.options.update({"input_format": "protobuf", "output_format": "protobuf",
                        **registry_options(schema_registry.url, "protobuf")})
    return job



def test_protobuf_in_and_out_is_exact_and_each_malformed_kind_is_a_dead_letter_with_its_reason(protobuf_job):
    sample = produce_sample(protobuf_job, count=1200, seed=3, partitions=4, malformed_rate=0.05)
    run = protobuf_job.run(max_offsets_per_trigger="400")
    assert run.returncode == 0, run.stdout[-3000:]
    verdict = protobuf_job.verify(*merged(sample))
    assert verdict.exactly_once, verdict.problems
    key = protobuf_job.config().key_field
    kinds = input_values(protobuf_job.config()).malformed(key)  # as the sample wrote them (the same bytes)
    subject = f"{protobuf_job.input_topic}-value"
    schema_id = int.from_bytes(kinds[3][1:5], "big")
    expected = [
        "not in the registry's wire format: magic byte 0x7B, not 0x00",
        "not in the registry's wire format: 3 bytes, shorter than its 5-byte header",
        "unknown schema id 2147483641",
        f"body does not decode with schema id {schema_id} as sample.SampleEvent: ",
        f"message index [4] is not in schema id {schema_id}",
        f"schema id {int.from_bytes(kinds[5][1:5], 'big')} is not a version of subject {subject!r}",
        f"missing key field {key!r}",
    ]
    assert_each_malformed_kind_is_its_dead_letter(protobuf_job, kinds, expected, run.stdout)


def test_an_output_schema_that_does_not_fit_the_answer_stops_the_start_in_one_line(protobuf_job, tmp_path):
    path = tmp_path / "wrong.proto"
    path.write_text(re.sub(r"\n\s*int64 batch_id = \d+;", "", OUTPUT_SCHEMA.read_text()))
    produce_sample(protobuf_job, count=10, seed=1, partitions=4, malformed_rate=0.0)
    run = protobuf_job.run(output_schema=str(path))
    assert run.returncode == 2, run.stdout[-3000:]
    assert_stops_in_one_line(run.stdout, "error: configuration option 'output_schema': ")
    assert protobuf_job.published(settle=0).records() == 0


def test_a_producer_moving_to_a_new_version_in_the_middle_of_a_run_is_read_on_exactly(protobuf_job):
    """v1 events; while the job runs, v2 events (a field added: compatible) registered by the
    producer as it writes them: the job meets v2's id, rebuilds its query once, then reads v1 and
    v2 alike, nothing lost or doubled."""
    first = produce_sample(protobuf_job, count=1500, seed=31, partitions=4)
    with protobuf_job.running(until_idle=6, max_offsets_per_trigger="500") as (process, log_path):
        wait_until(lambda: "batch 0:" in log_path.read_text(), 300, "the job's first batch", alive=process,
                   log_path=log_path)
        config = protobuf_job.config()
        v2 = ProtobufValues(config.schema_registry, f"{protobuf_job.input_topic}-value", dict(config.schema),
                            extra_fields=(("note", "string"),))
        second = configured_sample(config, protobuf_job.keep, 900, seed=33, values=v2)  # registers v2
        assert v2.client.get_versions(v2.subject) == [1, 2]
        mark = len(log_path.read_text())
        produce(protobuf_job.bootstrap_servers, protobuf_job.input_topic, second.values, partitions=4)
        protobuf_job.counted_values |= second.counted_values
        process.wait(400)
    output = log_path.read_text()
    assert process.returncode == 0, output[-3000:]
    assert output[mark:].count("rebuilding the query: schema id") == 1, output[-3000:]
    verdict = protobuf_job.verify(*merged(first, second))
    assert verdict.exactly_once, verdict.problems
