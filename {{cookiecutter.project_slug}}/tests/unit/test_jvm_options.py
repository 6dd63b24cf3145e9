"""The JVMs the tools start for the tests take the options the tests give them (harness.py's
TEST_JVM_OPTIONS, C1 alone): the brokers through KAFKA_OPTS, as Kafka's own scripts read it,
the S3 server through its constructor."""

from __future__ import annotations

from pathlib import Path

from {{ cookiecutter.package_name }}_tools.kafka_local.cluster import LocalKafkaCluster
from {{ cookiecutter.package_name }}_tools.s3_local import S3Server


def test_kafka_opts_reach_every_broker_the_tools_start(tmp_path, monkeypatch):
    """KAFKA_OPTS, as Kafka's own scripts read it, for a process node and a container node alike
    (the tests give their brokers C1 alone this way)."""
    monkeypatch.setenv("KAFKA_OPTS", " -XX:TieredStopAtLevel=1 -Dprobe=yes ")
    process_node = LocalKafkaCluster(tmp_path / "p", launcher="process").nodes[1]
    command = process_node._java(tmp_path, "kafka.Kafka", "server.properties")
    assert command[command.index("-Xms128m") + 1:][:2] == ["-XX:TieredStopAtLevel=1", "-Dprobe=yes"]
    container_node = LocalKafkaCluster(tmp_path / "c", launcher="container").nodes[1]
    container_node.voters = "1@127.0.0.1:1"
    assert container_node.environment()["KAFKA_OPTS"] == "-XX:TieredStopAtLevel=1 -Dprobe=yes"


def test_the_s3_servers_jvm_takes_the_options_it_is_given(tmp_path):
    command = S3Server(tmp_path, jvm_options="-XX:TieredStopAtLevel=1 -Dprobe=yes").command(
        "java", tmp_path, Path("s3proxy.conf"))
    assert command[:4] == ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dprobe=yes"]
    plain = S3Server(tmp_path).command("java", tmp_path, Path("s3proxy.conf"))
    assert plain[2] == "-Dlogback.configurationFile=/dev/null"  # none given, none added
