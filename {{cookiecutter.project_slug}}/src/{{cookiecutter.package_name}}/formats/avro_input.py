"""Avro input in the registry's wire format: what the query's plan knows of it, from the
registry when the query is built (pipeline/avro_parsing.py decodes with it, in the JVM): the
writer schema of each version of the input's subject, the reader schema (its latest version,
checked against `[schema]`), and the ids of a re-run batch that are not the subject's, judged."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import JobConfig
from ..failures import ConfigError
from .registry import Registry, Subject

# A field only the reader schema has, default true: null after from_avro means the body did not
# decode (PERMISSIVE mode then gives a record whose every field is null, not a null record).
DECODED = "_decoded_by_the_job"
# Avro types each `[schema]` type reads (a union with null reads as its other branch, null a dead letter).
READS = {"string": ("string", "enum"), "int": ("int", "long"), "float": ("float", "double", "int", "long"),
         "bool": ("boolean",)}


@dataclass(frozen=True)
class AvroInput:
    """What the query's plan knows: the subject's writer schemas by id, the reader schema (with
    DECODED), and the ids judged not to be the subject's, each with its dead-letter reason."""

    subject: str
    writers: dict[int, str]
    reader: str
    foreign: dict[int, str] = field(default_factory=dict)


def subject_name(config: JobConfig) -> str:
    return config.input_subject or f"{config.input_topic}-value"


def plan(config: JobConfig, registry: Registry, ids_to_judge: set[int]) -> AvroInput:
    """The subject's versions as the registry has them now, its latest as the reader schema
    (checked against `[schema]`), and `ids_to_judge` that are not its versions, judged."""
    subject = registry.subject(subject_name(config), "input_subject")
    if not subject.writers:
        raise ConfigError("input_subject", f"subject {subject.name!r} has no versions at {registry.url}")
    reader = reader_schema(subject, config.schema)
    foreign = {}
    for schema_id in sorted(ids_to_judge - set(subject.writers)):
        known = registry.schema(schema_id) is not None
        foreign[schema_id] = (f"schema id {schema_id} is not a version of subject {subject.name!r}" if known
                              else f"unknown schema id {schema_id}")
    return AvroInput(subject.name, subject.writers, reader, foreign)


def reader_schema(subject: Subject, fields: Mapping[str, str]) -> str:
    """The subject's latest schema with DECODED added; each `[schema]` field must be in it, of a type it reads."""
    schema = json.loads(subject.writers[subject.latest])
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ConfigError("input_subject", f"subject {subject.name!r}'s latest schema (id {subject.latest}) is not "
                                           "an Avro record")
    types = {item["name"]: item["type"] for item in schema["fields"]}
    for name, kind in fields.items():
        if name not in types:
            raise ConfigError("schema", f"field {name!r} is not in subject {subject.name!r}'s latest schema (id "
                                        f"{subject.latest}), whose fields are {sorted(types)}")
        found = _plain_type(types[name])
        if found not in READS[kind]:
            raise ConfigError("schema", f"field {name!r} is {found} in subject {subject.name!r}'s latest schema (id "
                                        f"{subject.latest}); a {kind} field reads {', '.join(READS[kind])}")
    schema["fields"] = [*schema["fields"], {"name": DECODED, "type": "boolean", "default": True}]
    return json.dumps(schema)


def _plain_type(avro_type: Any) -> str:
    """An Avro field's type by name: a union with null by its other branch."""
    if isinstance(avro_type, list):
        others = [branch for branch in avro_type if branch != "null"]
        return _plain_type(others[0]) if len(others) == 1 else "union"
    if isinstance(avro_type, dict):
        return str(avro_type.get("type"))  # a logical type by its underlying type
    return str(avro_type)
