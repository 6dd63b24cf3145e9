"""The job's values as the tools write and read them, apart from the job: JSON, or Avro in the
schema registry's wire format through confluent-kafka's own serializers (never the job's code).
The sample producer writes events in the input's format, the readback turns the answers into JSON,
so that the oracles compare one form whatever the format (readback.py, verify.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from {{ cookiecutter.package_name }}.config import JobConfig

Event = dict[str, object]
# The Avro types a sample's events are written with, per `[schema]` type; every field may be null,
# so that a sample can hold an event without its key.
_AVRO_TYPES = {"string": "string", "int": "long", "float": "double", "bool": "boolean"}
SAMPLE_RECORD = "SampleEvent"
# An id no registry hands out for years: the sample's "unknown schema id".
UNKNOWN_SCHEMA_ID = 2**31 - 7


class Values(Protocol):
    """A format, as the tools use it."""

    def event_value(self, event: Event) -> bytes: ...  # an event as the input holds it

    def event(self, value: bytes) -> Event: ...  # an input value back as an event

    def as_json(self, value: bytes) -> bytes: ...  # an answer's value as JSON (the oracles' form)

    def malformed(self, key_field: str) -> list[bytes]: ...  # values the job must dead-letter


class JsonValues:
    def event_value(self, event: Event) -> bytes:
        return json.dumps(event).encode()

    def event(self, value: bytes) -> Event:
        parsed: Event = json.loads(value)
        return parsed

    def as_json(self, value: bytes) -> bytes:
        return value

    def malformed(self, key_field: str) -> list[bytes]:
        from .sample import malformed_values

        return malformed_values(key_field)


JSON = JsonValues()


@dataclass
class AvroValues:
    """Avro under `subject` at the registry `settings` name (confluent-kafka's client settings):
    events written with a schema of `fields` (and `seq`), registered on first use."""

    settings: Mapping[str, str]
    subject: str
    fields: Mapping[str, str]
    extra_fields: tuple[dict[str, Any], ...] = ()  # Avro fields beside them (a later version), each with a default
    _client: SchemaRegistryClient | None = field(default=None, init=False, repr=False)
    _serializer: Any = field(default=None, init=False, repr=False)
    _deserializer: Any = field(default=None, init=False, repr=False)

    @property
    def client(self) -> SchemaRegistryClient:
        if self._client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            self._client = SchemaRegistryClient(dict(self.settings))
        return self._client

    def schema(self) -> str:
        """The sample's events' schema: `[schema]`'s fields and `seq`, each may be null."""
        names = [*self.fields, *(["seq"] if "seq" not in self.fields else [])]
        kinds = {**self.fields, "seq": self.fields.get("seq", "int")}
        return json.dumps({"type": "record", "name": SAMPLE_RECORD, "fields": [
            *({"name": name, "type": ["null", _AVRO_TYPES[kinds[name]]], "default": None} for name in names),
            *self.extra_fields]})

    def event_value(self, event: Event) -> bytes:
        from confluent_kafka.serialization import MessageField, SerializationContext

        if self._serializer is None:
            from confluent_kafka.schema_registry.avro import AvroSerializer

            subject = self.subject
            self._serializer = AvroSerializer(self.client, self.schema(), conf={
                "auto.register.schemas": True, "subject.name.strategy": lambda _context, _name: subject})
        defaults = {extra["name"]: extra["default"] for extra in self.extra_fields}
        value: bytes = self._serializer({**defaults, **event}, SerializationContext(self.subject, MessageField.VALUE))
        return value

    def event(self, value: bytes) -> Event:
        return self._decoded(value)

    def as_json(self, value: bytes) -> bytes:
        return json.dumps(self._decoded(value)).encode()

    def _decoded(self, value: bytes) -> Event:
        from confluent_kafka.serialization import MessageField, SerializationContext

        if self._deserializer is None:
            from confluent_kafka.schema_registry.avro import AvroDeserializer

            self._deserializer = AvroDeserializer(self.client)
        decoded: Event = self._deserializer(value, SerializationContext(self.subject, MessageField.VALUE))
        return decoded

    def malformed(self, key_field: str) -> list[bytes]:
        """One of each dead letter the Avro input has: no header, a short value, an unknown id, a
        body cut short, a schema of another subject, an event without its key."""
        from confluent_kafka.schema_registry import Schema

        good = self.event_value({key_field: _a_key(self.fields[key_field])})
        other = json.dumps({"type": "record", "name": "OtherSubjectsEvent", "fields": [{"name": "n", "type": "long"}]})
        other_id = self.client.register_schema(f"{self.subject}-other", Schema(other, "AVRO"))
        return [
            json.dumps({key_field: "red"}).encode(),  # JSON: magic byte 0x7B
            b"\x00\x00\x01",  # shorter than the header
            b"\x00" + UNKNOWN_SCHEMA_ID.to_bytes(4, "big") + good[5:],
            good[:6],  # the body cut after its first byte
            b"\x00" + other_id.to_bytes(4, "big") + b"\x02",  # n = 1, in another subject's schema
            self.event_value({key_field: None}),
        ]


def _a_key(kind: str) -> object:
    return {"string": "k", "int": 1, "float": 1.0, "bool": True}[kind]


def input_values(config: JobConfig) -> Values:
    """The input's format, as the job is configured."""
    if config.input_format != "avro":
        return JSON
    return AvroValues(config.schema_registry, config.input_subject or f"{config.input_topic}-value",
                      dict(config.schema))


def output_values(config: JobConfig) -> Values:
    """The answers' format, as the job is configured (dead letters are JSON whatever it is)."""
    if config.output_format != "avro":
        return JSON
    return AvroValues(config.schema_registry, config.output_subject or f"{config.output_topic}-value",
                      dict(config.schema))
