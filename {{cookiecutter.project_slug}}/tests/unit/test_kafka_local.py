from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.devtools.kafka_local import KafkaUnavailable, chosen_provider
from {{ cookiecutter.package_name }}.devtools.kafka_local.process import server_properties


def test_single_broker_settings_allow_transactions(tmp_path):
    properties = dict(
        line.split("=", 1) for line in server_properties(tmp_path, 9092, 9093, 9094).splitlines() if line
    )
    assert properties["transaction.state.log.replication.factor"] == "1"
    assert properties["transaction.state.log.min.isr"] == "1"
    assert properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094"
    assert properties["sasl.enabled.mechanisms"] == "PLAIN"
    assert properties["process.roles"] == "broker,controller"


def test_unknown_provider_is_rejected_with_the_choices(monkeypatch):
    monkeypatch.setenv("KAFKA_PROVIDER", "kubernetes")
    with pytest.raises(KafkaUnavailable, match="env, testcontainers, process"):
        chosen_provider()


def test_missing_tool_says_what_to_install(monkeypatch, tmp_path):
    from {{ cookiecutter.package_name }}.devtools import maven
    from {{ cookiecutter.package_name }}.devtools.kafka_local import process

    monkeypatch.setenv("KAFKA_LOCAL_CACHE", str(tmp_path))
    monkeypatch.setattr(maven.shutil, "which", lambda tool: None)
    with pytest.raises(KafkaUnavailable, match="apt-get install maven"):
        process.resolve_jars()
