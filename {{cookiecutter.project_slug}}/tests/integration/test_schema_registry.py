"""The schema registry the tests start (the tools' schema_registry.py: Apicurio Registry from Maven
Central, as a process), spoken to as the job's clients and the proof's producers will: with
confluent-kafka's SchemaRegistryClient and Avro serializers, over its Confluent-compatible API.
Compatible versions of a subject get ids of their own, which records carry in the registry's wire
format (a magic byte 0, the id in 4 bytes, the Avro body); an incompatible version is refused; a
registry killed and started again serves the schemas it had."""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from {{ cookiecutter.package_name }}_tools.schema_registry import SchemaRegistry

from harness import CONFIG, TEST_JVM_OPTIONS

pytestmark = pytest.mark.integration

KEY = CONFIG.key_field
V1 = {"type": "record", "name": "Event", "fields": [{"name": KEY, "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "amount", "type": "int", "default": 0}]}  # a field with a default
V3 = {**V1, "fields": [{"name": KEY, "type": "int"}]}  # the key's type changed: readers of V2 cannot read it


def backward_subject(client: SchemaRegistryClient) -> tuple[str, SerializationContext]:
    """A new topic's value subject (the topic-name strategy), which accepts a version only if
    readers of it can read the versions before (BACKWARD, the registries' usual rule)."""
    topic = f"events-{uuid.uuid4().hex[:8]}"
    subject = f"{topic}-value"
    client.set_compatibility(subject_name=subject, level="BACKWARD")
    return subject, SerializationContext(topic, MessageField.VALUE)


def header(record: bytes) -> tuple[int, int]:
    """The wire format's magic byte and schema id."""
    return record[0], struct.unpack(">I", record[1:5])[0]


def test_compatible_versions_are_read_in_the_wire_format(schema_registry: SchemaRegistry) -> None:
    client = schema_registry.client()
    subject, context = backward_subject(client)
    first = AvroSerializer(client, json.dumps(V1))({KEY: "a"}, context)
    second = AvroSerializer(client, json.dumps(V2))({KEY: "b", "amount": 3}, context)
    (magic_1, id_1), (magic_2, id_2) = header(first), header(second)
    assert (magic_1, magic_2) == (0, 0) and id_1 != id_2
    assert client.get_versions(subject) == [1, 2]
    assert {client.get_version(subject, 1).schema_id, client.get_version(subject, 2).schema_id} == {id_1, id_2}
    reader = AvroDeserializer(client, json.dumps(V2))
    assert reader(first, context) == {KEY: "a", "amount": 0}  # V1's record, read as V2: the default
    assert reader(second, context) == {KEY: "b", "amount": 3}


def test_an_incompatible_version_is_refused(schema_registry: SchemaRegistry) -> None:
    client = schema_registry.client()
    subject, context = backward_subject(client)
    AvroSerializer(client, json.dumps(V2))({KEY: "a", "amount": 1}, context)
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(V3), "AVRO"))
    assert refused.value.http_status_code == 409, refused.value
    assert client.get_versions(subject) == [1]


def test_a_registry_killed_and_started_again_serves_what_it_had(tmp_path: Path) -> None:
    """A registry of its own: SIGKILLed (a crash), it refuses connections; started again on its
    storage, it serves the same ids and schemas."""
    registry = SchemaRegistry(tmp_path / "registry", jvm_options=TEST_JVM_OPTIONS)
    registry.start()
    try:
        client = registry.client()
        subject, context = backward_subject(client)
        record = AvroSerializer(client, json.dumps(V1))({KEY: "a"}, context)
        _, schema_id = header(record)
        registry.stop()
        with pytest.raises(Exception, match=r"(?i)connect|refused"):
            SchemaRegistryClient({"url": registry.url}).get_versions(subject)
        registry.start()
        again = SchemaRegistryClient({"url": registry.url})  # no cache of the first client's
        assert json.loads(again.get_schema(schema_id).schema_str) == V1
        assert again.get_versions(subject) == [1]
        assert AvroDeserializer(again)(record, context) == {KEY: "a"}
    finally:
        registry.stop()
