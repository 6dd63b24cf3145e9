"""A savepoint's manifest (`manifest.json`, written last): what it holds, what its state means,
its checksums; read back checked."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..config import JobConfig
from ..failures import ConfigError
from ..storage.files import exists, filesystem, read_bytes, resolve_location
from ..storage.layout_versions import UnknownFormat, check_format

FORMAT_VERSION = 2
MANIFEST = "manifest.json"
STATE_DIR = "state"
# A savepoint records these options; a restore with other values of them is refused.
MEANING = ("key_field", "schema")
# The manifest's record of the query its state was computed by (pipeline/fingerprint.py).
QUERY_FINGERPRINT = "query_fingerprint"
# And these, for the record (a restore may change them).
RECORDED = ("input_topic", "output_topic", "dead_letter_topic", "marker_topic", "filter", "sink_id",
            "transactional_id_prefix", "commit_shards", "shuffle_partitions", "state_ttl_seconds")


class SavepointError(ConfigError):
    """A savepoint that cannot be taken or restored safely; names the option or the path."""



def declared_state(config: JobConfig) -> str:
    """The answer's state columns as pipeline/query.py declares them (pipeline/aggregates.py), as a
    Spark schema{% if cookiecutter.query != "count-by-key" %}: none, this query keeps no answer per key{% endif %}."""
{%- if cookiecutter.query == "count-by-key" %}
    from ..pipeline.steps import checked_answer

    return checked_answer(config).state_ddl()
{%- else %}
    return ""
{%- endif %}


def state_schema(config: JobConfig) -> str:
    """A savepoint's state files: the key, the answer's state columns, and `expires_at_ms` (epoch
    milliseconds, null without a state TTL)."""
    return f"key STRING, {declared_state(config)}, expires_at_ms BIGINT"


@dataclass
class Manifest:
    format_version: int
    created_at: float
    batch_id: int  # the last batch the savepoint includes (Spark's, in its checkpoint)
    first_batch_id: int  # the output batch id of that checkpoint's batch 0 (first_batch_id())
    generation: int
    sink_id: str  # the generation's sink id (markers)
    source_offsets: dict[str, dict[str, int]]  # {"<topic>": {"<partition>": next offset}}
    published: dict[str, int]  # the sink's last published batch per shard, {"<shard>": batch}
    config: dict[str, Any]
    state: str  # the answer's state columns (pipeline/aggregates.py), as a Spark schema
    keys: int
    files: list[dict[str, Any]] = field(default_factory=list)  # {"path", "bytes", "sha256"}

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Manifest:
        try:
            raw = json.loads(data)
        except ValueError as error:
            raise SavepointError("savepoint", f"{where}: the manifest is not JSON ({error})") from None
        try:
            check_format(where, raw.get("format_version") if isinstance(raw, dict) else None, FORMAT_VERSION)
        except UnknownFormat as error:  # a savepoint given to a command: its option is named
            raise SavepointError("savepoint", f"{error} Or take a new savepoint with the job that wrote it.") from None
        try:
            return cls(**raw)
        except TypeError as error:
            raise SavepointError("savepoint", f"{where}: the manifest is incomplete ({error})") from None


def sha256(fs, path: str) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with fs.open_input_stream(path) as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def read_manifest(path: str, verify: bool = True) -> Manifest:
    """The savepoint at `path`, its state files checked against their checksums (`verify`)."""
    fs, base = filesystem(path)
    where = resolve_location(path)
    if not exists(fs, f"{base}/{MANIFEST}"):
        what = "an unfinished savepoint (no manifest: its creation was cut short)" if exists(fs, base) else "nothing"
        raise SavepointError("savepoint", f"{where} holds {what}; take a savepoint with `savepoint create`")
    manifest = Manifest.from_json(read_bytes(fs, f"{base}/{MANIFEST}"), where)
    if verify:
        for entry in manifest.files:
            digest, size = sha256(fs, f"{base}/{entry['path']}")
            if (digest, size) != (entry["sha256"], entry["bytes"]):
                raise SavepointError("savepoint", f"{where}/{entry['path']}: {size} bytes with sha256 {digest}, the "
                                     f"manifest says {entry['bytes']} bytes with {entry['sha256']}: it was changed "
                                     "or damaged")
    return manifest
