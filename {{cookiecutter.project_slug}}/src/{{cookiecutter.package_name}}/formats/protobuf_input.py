"""Protobuf input in the registry's wire format: what the query's plan knows of it, from the
registry when the query is built (pipeline/protobuf_parsing.py decodes with it, in the JVM): the
reader's message (`input_message`, in the subject's latest version, checked against `[schema]`),
each version's compiled schema that has it, and the ids of a re-run batch that are not the
subject's, judged. A field the reader's message has and a writer's lacks reads as unset."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..config import JobConfig
from ..failures import ConfigError
from .protobuf_schema import Message, descriptor_set, message
from .registry import Registry

# Protobuf types each `[schema]` type reads (the decoder gives them as text, cast to `[schema]`'s type).
_INTEGERS = ("int32", "int64", "sint32", "sint64", "sfixed32", "sfixed64", "uint32", "fixed32")
READS = {"string": ("string", "enum"), "int": _INTEGERS, "float": ("double", "float", *_INTEGERS), "bool": ("bool",)}


@dataclass(frozen=True)
class ProtobufInput:
    """What the query's plan knows: the reader's message by full name, each version's compiled
    schema (a FileDescriptorSet) by id, and the ids judged not readable, each with its dead-letter
    reason (another subject's, unknown, or a version without the reader's message)."""

    subject: str
    message: str
    writers: dict[int, bytes]
    foreign: dict[int, str] = field(default_factory=dict)


def subject_name(config: JobConfig) -> str:
    return config.input_subject or f"{config.input_topic}-value"


def plan(config: JobConfig, registry: Registry, ids_to_judge: set[int]) -> ProtobufInput:
    """The subject's versions as the registry has them now, the reader's message found in its
    latest (checked against `[schema]`), and `ids_to_judge` that are not its versions, judged."""
    subject = registry.subject(subject_name(config), "input_subject", "PROTOBUF")
    if not subject.writers:
        raise ConfigError("input_subject", f"subject {subject.name!r} has no versions at {registry.url}")
    latest = f"subject {subject.name!r}'s latest schema (id {subject.latest})"
    reader = message(descriptor_set(subject.writers[subject.latest], "input_subject", latest), config.input_message,
                     "input_message", latest)
    check_fields(reader, config.schema, latest)
    writers: dict[int, bytes] = {}
    foreign: dict[int, str] = {}
    for schema_id, text in subject.writers.items():
        what = f"subject {subject.name!r}'s schema id {schema_id}"
        compiled = descriptor_set(text, "input_subject", what)
        try:
            message(compiled, reader.name, "input_message", what)
        except ConfigError:
            foreign[schema_id] = f"schema id {schema_id} has no message {reader.name}"
            continue
        writers[schema_id] = compiled
    for schema_id in sorted(ids_to_judge - set(subject.writers)):
        known = registry.schema(schema_id) is not None
        foreign[schema_id] = (f"schema id {schema_id} is not a version of subject {subject.name!r}" if known
                              else f"unknown schema id {schema_id}")
    return ProtobufInput(subject.name, reader.name, writers, foreign)


def check_fields(reader: Message, fields: Mapping[str, str], what: str) -> None:
    """Each `[schema]` field must be a top-level field of the reader's message, of a type it reads."""
    for name, kind in fields.items():
        if name not in reader.fields:
            raise ConfigError("schema", f"field {name!r} is not in message {reader.name} of {what}, whose fields "
                                        f"are {sorted(reader.fields)}")
        if reader.fields[name] not in READS[kind]:
            raise ConfigError("schema", f"field {name!r} is {reader.fields[name]} in message {reader.name} of {what}; "
                                        f"a {kind} field reads {', '.join(READS[kind])}")
