"""The job's values as the tools write and read them, apart from the job: JSON, or Avro or Protobuf
in the schema registry's wire format through confluent-kafka's own serializers (never the job's code).
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


# The Protobuf types a sample's events are written with, per `[schema]` type (proto2 `optional`
# fields, which have presence, so that a sample can hold an event without its key).
_PROTOBUF_TYPES = {"string": "TYPE_STRING", "int": "TYPE_INT64", "float": "TYPE_DOUBLE", "bool": "TYPE_BOOL"}
SAMPLE_PACKAGE = "sample"


@dataclass
class ProtobufValues:
    """Protobuf under `subject` at the registry `settings` name: events written as a message of
    `fields` (and `seq`), registered on first use by confluent-kafka's serializer (as a base64
    FileDescriptorProto, the form it registers); answers read with the message of the schema
    their id names (a `.proto` file, compiled by protoc)."""

    settings: Mapping[str, str]
    subject: str
    fields: Mapping[str, str]
    extra_fields: tuple[tuple[str, str], ...] = ()  # (name, `[schema]` type) beside them: a later version
    _client: SchemaRegistryClient | None = field(default=None, init=False, repr=False)
    _serializer: Any = field(default=None, init=False, repr=False)
    _event_class: Any = field(default=None, init=False, repr=False)
    _answer_classes: dict[int, Any] = field(default_factory=dict, init=False, repr=False)
    _deserializers: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)  # per message class

    @property
    def client(self) -> SchemaRegistryClient:
        if self._client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            self._client = SchemaRegistryClient(dict(self.settings))
        return self._client

    def event_class(self) -> Any:
        """The sample's events' message, `sample.SampleEvent`: `[schema]`'s fields, `seq`, then the extra ones."""
        if self._event_class is None:
            from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

            names = [*self.fields, *(["seq"] if "seq" not in self.fields else [])]
            kinds = [*((name, {**self.fields, "seq": self.fields.get("seq", "int")}[name]) for name in names),
                     *self.extra_fields]
            file = descriptor_pb2.FileDescriptorProto(name=f"{self.subject}.proto", package=SAMPLE_PACKAGE,
                                                      syntax="proto2")
            message = file.message_type.add(name=SAMPLE_RECORD)
            for number, (name, kind) in enumerate(kinds, start=1):
                message.field.add(name=name, number=number, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                                  type=getattr(descriptor_pb2.FieldDescriptorProto, _PROTOBUF_TYPES[kind]))
            pool = descriptor_pool.DescriptorPool()
            pool.Add(file)
            self._event_class = message_factory.GetMessageClass(
                pool.FindMessageTypeByName(f"{SAMPLE_PACKAGE}.{SAMPLE_RECORD}"))
        return self._event_class

    def event_value(self, event: Event) -> bytes:
        from confluent_kafka.serialization import MessageField, SerializationContext

        if self._serializer is None:
            from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

            subject = self.subject
            self._serializer = ProtobufSerializer(self.event_class(), self.client, conf={
                "auto.register.schemas": True, "use.deprecated.format": False,
                "subject.name.strategy": lambda _context, _name: subject})
        message = self.event_class()(**{name: value for name, value in event.items() if value is not None})
        value: bytes = self._serializer(message, SerializationContext(self.subject, MessageField.VALUE))
        return value

    def event(self, value: bytes) -> Event:
        return _as_dict(self._decoded(value, self.event_class()))

    def as_json(self, value: bytes) -> bytes:
        schema_id = int.from_bytes(value[1:5], "big")
        if schema_id not in self._answer_classes:
            self._answer_classes[schema_id] = _first_message_class(self.client.get_schema(schema_id).schema_str or "")
        return json.dumps(_as_dict(self._decoded(value, self._answer_classes[schema_id]))).encode()

    def _decoded(self, value: bytes, message_class: Any) -> Any:
        from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        if message_class not in self._deserializers:
            self._deserializers[message_class] = ProtobufDeserializer(message_class, {"use.deprecated.format": False})
        return self._deserializers[message_class](value, SerializationContext(self.subject, MessageField.VALUE))

    def malformed(self, key_field: str) -> list[bytes]:
        """One of each dead letter the Protobuf input has: no header, a short value, an unknown id,
        a body that does not decode, a message index the schema lacks, a schema of another subject,
        an event without its key."""
        from confluent_kafka.schema_registry import Schema

        good = self.event_value({key_field: _a_key(self.fields[key_field])})
        header = good[:5]
        other = 'syntax = "proto3";\npackage other;\nmessage OtherSubjectsEvent { int64 n = 1; }\n'
        other_id = self.client.register_schema(f"{self.subject}-other", Schema(other, "PROTOBUF"))
        return [
            json.dumps({key_field: "red"}).encode(),  # JSON: magic byte 0x7B
            b"\x00\x00\x01",  # shorter than the header
            b"\x00" + UNKNOWN_SCHEMA_ID.to_bytes(4, "big") + good[5:],
            header + b"\x00\x0f",  # the first message, then a field of wire type 7, which is none
            header + b"\x02\x08",  # message index [4]: the schema has one message
            b"\x00" + other_id.to_bytes(4, "big") + b"\x00\x08\x01",  # n = 1, in another subject's schema
            self.event_value({key_field: None}),
        ]


def _as_dict(message: Any) -> Event:
    """A message's top-level fields by name, an unset one (with presence) as None."""
    return {item.name: (getattr(message, item.name) if not item.has_presence or message.HasField(item.name) else None)
            for item in message.DESCRIPTOR.fields}


def _first_message_class(text: str) -> Any:
    """The first message of a schema the registry holds: `.proto` text compiled by protoc, or a
    base64 FileDescriptorProto."""
    import base64
    import binascii
    import shutil
    import subprocess
    import sysconfig
    import tempfile
    from pathlib import Path

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    try:
        files = [descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))]
    except (binascii.Error, ValueError):
        protoc = Path(sysconfig.get_path("scripts")) / "protoc"
        with tempfile.TemporaryDirectory() as directory:
            (Path(directory) / "schema.proto").write_text(text)
            out = Path(directory) / "schema.desc"
            subprocess.run([str(protoc) if protoc.is_file() else shutil.which("protoc") or "protoc",
                            f"--descriptor_set_out={out}", f"-I{directory}", "schema.proto"], check=True, cwd=directory)
            files = list(descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file)
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    first = files[-1].message_type[0].name
    package = files[-1].package
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{first}" if package else first))


def _a_key(kind: str) -> object:
    return {"string": "k", "int": 1, "float": 1.0, "bool": True}[kind]


def input_values(config: JobConfig) -> Values:
    """The input's format, as the job is configured."""
    subject = config.input_subject or f"{config.input_topic}-value"
    if config.input_format == "protobuf":
        return ProtobufValues(config.schema_registry, subject, dict(config.schema))
    if config.input_format != "avro":
        return JSON
    return AvroValues(config.schema_registry, subject, dict(config.schema))


def output_values(config: JobConfig) -> Values:
    """The answers' format, as the job is configured (dead letters are JSON whatever it is)."""
    subject = config.output_subject or f"{config.output_topic}-value"
    if config.output_format == "protobuf":
        return ProtobufValues(config.schema_registry, subject, dict(config.schema))
    if config.output_format != "avro":
        return JSON
    return AvroValues(config.schema_registry, subject, dict(config.schema))
