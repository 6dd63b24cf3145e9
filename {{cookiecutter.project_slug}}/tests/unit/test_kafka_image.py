"""The local Kafka image: its entrypoint reads the same KAFKA_* variables as apache/kafka,
and its tag changes exactly when its recipe does."""

from __future__ import annotations

import shutil
import subprocess
from importlib import resources

import pytest

from {{ cookiecutter.package_name }}_tools.kafka_local import containers, image


def entrypoint_properties(env: dict[str, str]) -> dict[str, str]:
    script = resources.files(image.__package__).joinpath("image", "entrypoint.sh")
    with resources.as_file(script) as path:
        output = subprocess.run(
            ["sh", str(path), "properties"], env={"PATH": "/usr/bin:/bin", **env},
            capture_output=True, text=True, check=True,
        ).stdout
    return dict(line.split("=", 1) for line in output.splitlines())


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_entrypoint_translates_the_apache_kafka_variables():
    properties = entrypoint_properties(containers.kafka_environment(9092, 9094))
    assert properties["transaction.state.log.replication.factor"] == "1"
    assert properties["transaction.state.log.min.isr"] == "1"
    assert properties["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9094"
    assert properties["listener.security.protocol.map"] == (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT")
    # The SASL listener's user, under the property name the broker reads.
    assert 'user_counts-job="' in properties["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert properties["log.dirs"] == containers.DATA_DIR


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_a_container_node_gets_the_process_nodes_configuration(tmp_path):
    """A secured cluster's node in a container (container_node.py) reads, through the image's
    variables, the very properties a process node writes to its file, its data in the volume."""
    from {{ cookiecutter.package_name }}_tools.kafka_local.cluster import LocalKafkaCluster
    from {{ cookiecutter.package_name }}_tools.kafka_local.container_node import ContainerNode
    from {{ cookiecutter.package_name }}_tools.kafka_local.process import server_properties

    cluster = LocalKafkaCluster(tmp_path, secured=True, launcher="container")
    node = cluster.nodes[2]
    assert isinstance(node, ContainerNode)
    node.voters = cluster.voters
    environment = node.environment()
    assert environment["CLUSTER_ID"] == cluster.nodes[1].cluster_id and "-Xmx384m" in environment["KAFKA_HEAP_OPTS"]
    written = server_properties(tmp_path / "data", node.port, node.controller_port, node.sasl_port, 2, cluster.voters,
                                (node.secured_port, cluster.certificates))
    expected = dict(line.split("=", 1) for line in written.splitlines() if line)
    expected["log.dirs"] = containers.DATA_DIR
    assert entrypoint_properties(environment) == expected


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_entrypoint_escapes_and_skips_like_apache_kafka():
    properties = entrypoint_properties({
        "KAFKA_SOME__NAME___X": "a=b",  # "__" is "_", "___" is "-", values keep their "="
        "KAFKA_HEAP_OPTS": "-Xmx1g",  # a JVM setting, not a broker property
        "OTHER": "1",
    })
    assert properties == {"some_name-x": "a=b", "log.dirs": "/var/lib/kafka/data"}


def test_local_image_tag_carries_version_and_recipe_hash(monkeypatch):
    tag = image.local_image()
    assert tag == f"{image.LOCAL_REPOSITORY}:{image.KAFKA_VERSION}-{image.recipe_hash()}"
    # Any change to a recipe file, or to the Kafka version, gives a new tag (an image rebuilt, not reused).
    real = image._recipe_file
    for name in image.RECIPE:
        monkeypatch.setattr(image, "_recipe_file", lambda n, changed=name: real(n) + (b" " if n == changed else b""))
        assert image.local_image() != tag, f"a change to {name} kept the tag"
    monkeypatch.setattr(image, "_recipe_file", real)
    monkeypatch.setattr(image, "KAFKA_VERSION", "0.0.0")
    assert image.recipe_hash() != tag.rsplit("-", 1)[1]


def test_an_unreachable_registry_is_reported_unreachable():
    assert not image.registry_reachable("registry.invalid/kafka:1", timeout=2)
