"""The `[kafka]` client settings end to end: the job reaches the broker only through its
SASL_PLAINTEXT listener (source, sink producers, marker reader, preflight), with the password
taken from the environment; without the settings it fails at start-up naming the option."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}_tools.kafka_io import create_topics
from {{ cookiecutter.package_name }}_tools.kafka_local import KafkaHandle, LocalKafkaBroker, sasl
from {{ cookiecutter.package_name }}_tools.sample import Keep
from {{ cookiecutter.package_name }}_tools.verify import verify

from harness import JobUnderTest, expectation, produce_sample

pytestmark = pytest.mark.integration
PASSWORD_VARIABLE = "TEST_KAFKA_SASL_PASSWORD"


@pytest.fixture(scope="module")
def sasl_broker(kafka: KafkaHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(plaintext, SASL) bootstrap addresses of one broker: the session's, when we started it;
    with KAFKA_BOOTSTRAP_SERVERS (no known SASL listener), a broker of this module's own."""
    if kafka.sasl_bootstrap_servers:
        yield kafka.bootstrap_servers, kafka.sasl_bootstrap_servers
        return
    broker = LocalKafkaBroker(tmp_path_factory.mktemp("sasl-broker"))
    broker.start()
    try:
        yield broker.bootstrap_servers, broker.sasl_bootstrap_servers
    finally:
        broker.stop()


def _job(bootstrap: str, tmp_path: Path, keep: Keep, options: dict[str, str]) -> JobUnderTest:
    names = {kind: f"{kind}-{uuid.uuid4().hex[:10]}" for kind in ("events", "counts", "dead")}
    create_topics(bootstrap, {name: 2 if kind == "events" else 1 for kind, name in names.items()})
    return JobUnderTest(bootstrap_servers=bootstrap, workdir=tmp_path, input_topic=names["events"],
                        output_topic=names["counts"], dead_letter_topic=names["dead"], keep=keep,
                        guarantee="exactly-once", options=options)


def test_the_job_runs_through_a_sasl_listener_exactly_once(sasl_broker, tmp_path, event_filter, format_options):
    plaintext, secured = sasl_broker
    job = _job(plaintext, tmp_path, event_filter, format_options)
    sample = produce_sample(job, count=1500, seed=5, partitions=2)
    job.bootstrap_servers = secured  # from here on the job sees only the SASL listener
    settings = {f"kafka.{name}": value for name, value in sasl.client_settings().items()}
    settings["kafka.sasl.password"] = "${" + PASSWORD_VARIABLE + "}"
    result = job.run(extra_env={PASSWORD_VARIABLE: sasl.SASL_PASSWORD}, **settings)
    assert result.returncode == 0, result.stdout[-3000:]
    assert sasl.SASL_PASSWORD not in result.stdout  # never logged

    job.bootstrap_servers = plaintext  # read back independently
    expected, malformed = expectation(sample)
    verdict = verify(job.published(), expected, malformed)
    assert verdict.exactly_once, verdict.problems


def test_without_the_client_settings_the_sasl_listener_refuses_the_job_at_start_up(sasl_broker, tmp_path, event_filter,
                                                                                  format_options):
    plaintext, secured = sasl_broker
    job = _job(plaintext, tmp_path, event_filter, format_options)
    job.bootstrap_servers = secured
    result = job.run(timeout=120)
    assert result.returncode != 0
    assert "configuration option 'bootstrap_servers'" in result.stdout, result.stdout[-3000:]


def test_a_wrong_password_fails_at_start_up(sasl_broker, tmp_path, event_filter, format_options):
    plaintext, secured = sasl_broker
    job = _job(plaintext, tmp_path, event_filter, format_options)
    job.bootstrap_servers = secured
    settings = {f"kafka.{name}": value for name, value in sasl.client_settings().items()}
    settings["kafka.sasl.password"] = "wrong"
    result = job.run(timeout=120, **settings)
    assert result.returncode != 0
    assert "configuration option 'bootstrap_servers'" in result.stdout, result.stdout[-3000:]
