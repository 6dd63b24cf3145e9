from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}_tools.kafka_local import KafkaUnavailable, chosen_provider
from {{ cookiecutter.package_name }}_tools.kafka_local.cluster import LocalKafkaCluster, transaction_log_partition
from {{ cookiecutter.package_name }}_tools.kafka_local.process import server_properties
from {{ cookiecutter.package_name }}_tools.processes import _outgoing_port_range, free_ports


def test_single_broker_settings_allow_transactions(tmp_path):
    properties = dict(
        line.split("=", 1) for line in server_properties(tmp_path, 9092, 9093, 9094).splitlines() if line
    )
    assert properties["transaction.state.log.replication.factor"] == "1"
    assert properties["transaction.state.log.min.isr"] == "1"
    assert properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094"
    assert properties["sasl.enabled.mechanisms"] == "PLAIN"
    assert properties["process.roles"] == "broker,controller"


def test_a_clusters_nodes_share_a_quorum_and_keep_three_replicas_two_in_sync(tmp_path):
    cluster = LocalKafkaCluster(tmp_path)
    voters = ",".join(f"{n}@127.0.0.1:{node.controller_port}" for n, node in cluster.nodes.items())
    assert len({node.cluster_id for node in cluster.nodes.values()}) == 1
    props = server_properties(tmp_path, 9092, 9093, 9094, node_id=2, voters=voters)
    assert "node.id=2" in props and f"controller.quorum.voters={voters}" in props
    for line in ("default.replication.factor=3", "min.insync.replicas=2", "transaction.state.log.replication.factor=3",
                 "transaction.state.log.min.isr=2", "offsets.topic.replication.factor=3"):
        assert line in props.splitlines()
    assert cluster.bootstrap_servers.count(",") == 2
    with pytest.raises(ValueError, match="at least 3"):
        LocalKafkaCluster(tmp_path, brokers=2)


def test_a_transactional_ids_coordinator_partition_is_kafkas():
    """Utils.abs(id.hashCode()) % partitions, as Java computes String.hashCode (vectors from jshell)."""
    assert [transaction_log_partition(name) for name in ("hello", "bench-bench-eos-12345678-0", "é-ü-0")] == [4, 3, 5]
    assert transaction_log_partition("polygenelubricants") == 0  # its hash code is Integer.MIN_VALUE


def test_unknown_provider_is_rejected_with_the_choices(monkeypatch):
    monkeypatch.setenv("KAFKA_PROVIDER", "kubernetes")
    with pytest.raises(KafkaUnavailable, match="env, testcontainers, process"):
        chosen_provider()


def test_missing_tool_says_what_to_install(monkeypatch, tmp_path):
    from {{ cookiecutter.package_name }}_tools import maven
    from {{ cookiecutter.package_name }}_tools.kafka_local import process

    monkeypatch.setenv("KAFKA_LOCAL_CACHE", str(tmp_path))
    monkeypatch.setattr(maven.shutil, "which", lambda tool: None)
    with pytest.raises(KafkaUnavailable, match="apt-get install maven"):
        process.resolve_jars()


def test_a_state_file_whose_pid_is_now_another_process_is_not_the_broker(tmp_path):
    """After a reboot, `kafka up` / `kafka down` find the old broker.json: its pid may be any
    process now. It is neither reported as the running broker nor signalled."""
    import json
    import subprocess
    import sys

    from {{ cookiecutter.package_name }}_tools.kafka_local import daemon

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        for pid in (other.pid, 2 ** 22 + 1):  # another group leader; no process at all
            (tmp_path / daemon.STATE_FILE).write_text(json.dumps(
                {"pid": pid, "port": 1, "controller_port": 2, "bootstrap_servers": "127.0.0.1:1"}))
            assert daemon.running_bootstrap(tmp_path) is None
            assert daemon.down(tmp_path) is False
        assert other.poll() is None, "kafka down signalled a process that is not the broker"
    finally:
        other.kill()
        other.wait()


def test_servers_get_ports_no_outgoing_connection_can_take_while_they_restart():
    """A broker or S3 server stopped and started on its port again must find it free: its ports
    are picked outside the kernel's range for outgoing connections' local ports."""
    low, high = _outgoing_port_range()
    ports = free_ports(8)
    assert len(set(ports)) == 8
    assert not [port for port in ports if low <= port <= high], (ports, (low, high))
