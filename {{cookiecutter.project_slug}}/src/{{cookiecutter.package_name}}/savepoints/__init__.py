"""Savepoints: a portable snapshot of the job, taken on purpose, from which a changed or
rescaled job resumes where the old one stopped (Flink's savepoints, on Spark).

A savepoint is a directory (local path or s3://):

    manifest.json       written last: format version, the batch it was taken at, the source
                        offsets after that batch, the sink's last published batch per shard,
                        the configuration that decides what an answer means, the answer's
                        state columns, checksums
    state/*.parquet     every key's state (state_schema: key, the answer's state columns as
                        pipeline/aggregates.py keeps them, and with a state TTL the time the
                        key expires), read from the checkpoint with Spark's state data source

Spark's checkpoint is tied to the query's plan and its shuffle partitions; a savepoint is not.
`run --from-savepoint PATH` starts a *new* checkpoint from it:

- the source starts at the savepoint's offsets;
- the keys' state enters the new checkpoint's state in its first batch, and only in it (a re-run of
  batch 0 reads them again, no later batch does): for Spark's aggregation as a second,
  one-shot streaming source (Spark's file source records in the checkpoint that it read them),
  merged with the events (pipeline/counting.py); for the TTL operator as transformWithState's initial state, which
  Spark applies in batch 0. A key is published only when events change it, not for its seed;
- with a state TTL, a key's state in the savepoint carries its expiry. A key expired by the
  time of the savepoint is left out (the job had forgotten it; Spark had not yet evicted it);
  one expired by the time of a restore with a TTL is not seeded (as a restart of the old
  checkpoint would have dropped it); a seeded key's TTL starts again at the restore (it lives
  up to one TTL longer than in the old job, never shorter);
- batch ids start at 0 again, so the sink gets a new identity: generation g+1 of the sink id
  (`<sink_id>.g<g+1>`: its own markers and transactional ids). The savepoint records the
  generation it was taken from; the new checkpoint records the one it runs (origin file).

Unsafe restores are refused: another format version, a state file that does not match its
checksum, another key field or schema, an answer kept in other state columns, a savepoint older
than what its sink published since, a savepoint that a checkpoint already started from, a
non-empty checkpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import JobConfig
from ..failures import ConfigError
from ..storage import checkpoint
from ..storage.files import exists, filesystem, list_names, read_bytes, resolve_location, write_atomic
from ..storage.layout_versions import UnknownFormat, check_format

if TYPE_CHECKING:
    from ..sink import SinkSettings

FORMAT_VERSION = 2
MANIFEST = "manifest.json"
STATE_DIR = "state"
# In a checkpoint started from a savepoint: where it came from, and the seed the first batch reads.
ORIGIN_FILE = "savepoint-origin.json"
SEED_DIR = "savepoint-seed"
# A savepoint records these options; a restore with other values of them is refused.
MEANING = ("key_field", "schema")
# The manifest's record of the query its state was computed by (pipeline/fingerprint.py).
QUERY_FINGERPRINT = "query_fingerprint"
# And these, for the record (a restore may change them).
RECORDED = ("input_topic", "output_topic", "dead_letter_topic", "marker_topic", "filter", "sink_id",
            "transactional_id_prefix", "commit_shards", "shuffle_partitions", "state_ttl_seconds")


class SavepointError(ConfigError):
    """A savepoint that cannot be taken or restored safely; names the option or the path."""


@dataclass(frozen=True)
class Origin:
    """What a checkpoint started from a savepoint keeps (`<checkpoint>/savepoint-origin.json`)."""

    savepoint: str
    manifest_sha256: str
    generation: int
    sink_id: str  # the generation's sink id: markers, transactional ids, sink log
    starting_offsets: str  # Spark's JSON form, the savepoint's offsets
    first_batch_id: int  # the batch id the output records of this checkpoint's batch 0 carry


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


def generation_sink_id(sink_id: str, generation: int) -> str:
    return sink_id if generation == 0 else f"{sink_id}.g{generation}"


def read_origin(config: JobConfig) -> Origin | None:
    fs, base = filesystem(config.checkpoint_location)
    path = f"{base}/{ORIGIN_FILE}"
    if not exists(fs, path):
        return None
    return Origin(**json.loads(read_bytes(fs, path)))


def apply_origin(config: JobConfig, origin: Origin | None) -> JobConfig:
    """The configuration a checkpoint runs with: started from a savepoint (`origin`, read once per
    start), its generation's sink id and the savepoint's offsets."""
    if origin is None:
        return config
    return dataclasses.replace(config, sink_id=origin.sink_id, starting_offsets=origin.starting_offsets)


def effective_config(config: JobConfig) -> JobConfig:
    """apply_origin with the checkpoint's origin: every command that reads the sink's markers
    goes through here."""
    return apply_origin(config, read_origin(config))


def first_batch_id(origin: Origin | None) -> int:
    """What to add to Spark's batch id for the `batch_id` of the output records: a checkpoint
    started from a savepoint continues the numbering of the job it was taken from, so that
    batch ids on the output topics keep growing (the markers use Spark's own batch ids)."""
    return 0 if origin is None else origin.first_batch_id


def sink_settings(config: JobConfig, origin: Origin | None = None) -> SinkSettings:
    """What the sink is told, from the configuration; `origin`: where a checkpoint started from a
    savepoint came from (read_origin)."""
    from ..sink import SinkSettings

    return SinkSettings(
        bootstrap_servers=config.bootstrap_servers,
        checkpoint=resolve_location(config.checkpoint_location),
        sink_id=config.sink_id,
        transactional_id_prefix=config.transactional_id_prefix,
        marker_topic=config.marker_topic,
        shards=config.commit_shards,
        commit_timeout_seconds=config.commit_timeout_seconds,
        publish_from=config.publish_from,
        on_rerun_mismatch=config.on_rerun_mismatch,
        client=dict(config.kafka),
        foreign_transaction_tolerance_seconds=config.foreign_transaction_tolerance_seconds,
        first_batch_id=first_batch_id(origin),
        avro_topics=frozenset({config.output_topic} if config.output_format == "avro" else ()),
    )


def seed_location(config: JobConfig, origin: Origin | None) -> str | None:
    """The savepoint's state the checkpoint's first batch reads, or None (not from a savepoint)."""
    if origin is None:
        return None
    return f"{resolve_location(config.checkpoint_location).rstrip('/')}/{SEED_DIR}"


# --- the manifest ---------------------------------------------------------------------------

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


def _sha256(fs, path: str) -> tuple[str, int]:
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
            digest, size = _sha256(fs, f"{base}/{entry['path']}")
            if (digest, size) != (entry["sha256"], entry["bytes"]):
                raise SavepointError("savepoint", f"{where}/{entry['path']}: {size} bytes with sha256 {digest}, the "
                                     f"manifest says {entry['bytes']} bytes with {entry['sha256']}: it was changed "
                                     "or damaged")
    return manifest


# --- create ---------------------------------------------------------------------------------

def savepoint_batch(config: JobConfig, markers: dict[int, int]) -> int:
    """The batch a savepoint of a stopped checkpoint is taken at: the last one Spark committed.
    A planned batch after it is fine when the sink did not publish it (Spark would compute it
    again from the same offsets); one the sink published is not (its state is in the
    checkpoint, its commit is not): the job must finish it first."""
    location = resolve_location(config.checkpoint_location)
    committed = checkpoint.committed_batches(location)
    if not committed:
        raise SavepointError("checkpoint_location", f"{location} has no committed batch: nothing to save")
    newest = committed[-1]
    published = max(markers.values(), default=-1)
    if published > newest:
        raise SavepointError(
            "checkpoint_location", f"batch {published} was published, but {location} has it not committed (the "
            "job stopped between the sink's commit and Spark's): run the job once more (`run --until-idle 1`), "
            "then take the savepoint")
    return newest


{% if cookiecutter.query == "count-by-key" -%}
def read_state(spark, config: JobConfig, batch_id: int):
    """Every key's state after `batch_id`, from the checkpoint (Spark's state data source), as a
    DataFrame (state_schema). The dead letters' per-partition counts are left out, and with a
    state TTL the keys already expired. A state of other columns than the answer declares (its
    code changed under the checkpoint) is refused in one line."""
    from pyspark.sql import functions as F

    from ..pipeline.changes import EVENTS_AFTER_SEED, GROUP_KEY
    from ..pipeline.steps import checked_answer

    spark.streams  # noqa: B018 - starts the StateStoreCoordinator, which reading a RocksDB store needs
    answer = checked_answer(config)
    location = resolve_location(config.checkpoint_location)
    reader = spark.read.format("statestore").option("batchId", batch_id)
    key = F.col(f"key.{GROUP_KEY}")
    # The checkpoint's operator decides, not the configuration (which may have changed since).
    operators = {row.operatorName for row in spark.read.format("state-metadata").load(location).collect()}
    if any(name.startswith("transformWithState") for name in operators):  # ttl_counting.py's value state
        from ..pipeline.ttl_counting import STATE_VARIABLE

        state = reader.option("stateVarName", STATE_VARIABLE).load(location)
        value = state.schema["value"].dataType["value"].dataType
        values, expiry = F.col("value.value"), F.col("value.ttlExpirationMs")
        state = state.where(key.isNotNull() & (expiry > int(time.time() * 1000)))
        extra: list[str] = []
    else:
        # Spark's aggregation keeps each state column's buffer (named after its function, not the
        # column), in the answer's order (counting.py); after a savepoint's seed, the count of
        # events since last.
        state = reader.load(location)
        value = state.schema["value"].dataType
        values, expiry = F.col("value"), F.lit(None)
        state = state.where(key.isNotNull())
        extra = [EVENTS_AFTER_SEED] if read_origin(config) is not None else []
    declared = [(column.name, column.type) for column in answer.state] + [(name, "BIGINT") for name in extra]
    found = [field.dataType.simpleString().upper() for field in value.fields]
    if found != [kind for _, kind in declared]:
        raise SavepointError("checkpoint_location", f"{location} keeps each key's state as ({', '.join(found)}) and "
                             f"pipeline/query.py's answer as ({answer.state_ddl()}): the answer changed under its "
                             "checkpoint")
    named = "struct<" + ", ".join(f"`{name}`: {kind}" for name, kind in declared) + ">"  # a cast renames by position
    renamed = state.select(key.alias("key"), values.cast(named).alias("value"),
                           expiry.cast("bigint").alias("expires_at_ms"))
    return renamed.select("key", *(F.col(f"value.`{column.name}`") for column in answer.state), "expires_at_ms")

{%- else -%}
def read_state(spark, config: JobConfig, batch_id: int):
    """This query keeps no answer per key to read."""
    raise SavepointError("savepoint", "this query keeps no answer per key for a savepoint or `state` to read")
{%- endif %}


def create(spark, config: JobConfig, effective: JobConfig, to: str, markers: dict[int, int]) -> Manifest:
    """Take a savepoint of the stopped job's checkpoint into `to` (a new path; one left
    unfinished by a crash is replaced). `effective`: the configuration the checkpoint runs with
    (effective_config); `markers`: its sink's last published batch per shard, read settled."""
    from ..pipeline.fingerprint import fingerprint
    from .pinned_query import read_pinned as read_pinned_query

    fs, base = filesystem(to)
    where = resolve_location(to)
    if exists(fs, f"{base}/{MANIFEST}"):
        raise SavepointError("savepoint", f"{where} already holds a savepoint; choose a new path")
    if exists(fs, base):
        fs.delete_dir(base)  # an unfinished one: its manifest, written last, is missing
    batch_id = savepoint_batch(config, markers)
    location = resolve_location(config.checkpoint_location)
    offsets = checkpoint.input_offsets(location, batch_id, config.input_topic)
    state = read_state(spark, config, batch_id)
    state.coalesce(1).write.parquet(f"{where.rstrip('/')}/{STATE_DIR}")
    _maybe_crash("SAVEPOINT_STATE_WRITTEN")
    files = []
    for name in sorted(list_names(fs, f"{base}/{STATE_DIR}")):
        if name.endswith(".parquet"):
            digest, size = _sha256(fs, f"{base}/{STATE_DIR}/{name}")
            files.append({"path": f"{STATE_DIR}/{name}", "bytes": size, "sha256": digest})
    origin = read_origin(config)
    manifest = Manifest(
        format_version=FORMAT_VERSION, created_at=time.time(), batch_id=batch_id,
        first_batch_id=origin.first_batch_id if origin else 0,
        generation=origin.generation if origin else 0, sink_id=effective.sink_id,
        source_offsets={config.input_topic: offsets},
        published={str(shard): batch for shard, batch in sorted(markers.items())},
        config={**{name: getattr(config, name) for name in (*MEANING, *RECORDED)},
                QUERY_FINGERPRINT: read_pinned_query(location) or fingerprint(config)},
        state=declared_state(config),
        keys=spark.read.parquet(f"{where.rstrip('/')}/{STATE_DIR}").count(), files=files)
    write_atomic(fs, f"{base}/{MANIFEST}", manifest.to_json())
    return manifest


# --- restore --------------------------------------------------------------------------------

def check_restorable(manifest: Manifest, config: JobConfig, where: str, markers_then: dict[int, int],
                     markers_next: dict[int, int]) -> None:
    """Refuse what would lose or double answers. `markers_then`: the savepoint's generation's
    markers now; `markers_next`: those of the generation a restore would start."""
    for option in MEANING:
        if manifest.config.get(option) != getattr(config, option):
            raise SavepointError(option, f"{getattr(config, option)!r}, but savepoint {where} was taken with "
                                 f"{manifest.config.get(option)!r}: its state means something else")
    from ..pipeline.fingerprint import fingerprint

    saved, now = manifest.config.get(QUERY_FINGERPRINT), fingerprint(config)
    if saved != now:
        raise SavepointError("savepoint", f"{where} holds the state of another query (fingerprint {saved}; "
                             f"pipeline/query.py now computes {now}): resumed, the new query would go on from the "
                             "old one's answers. Put the old query back to resume from it, or start on a new "
                             "checkpoint_location with a new sink_id.")
    declared = declared_state(config)
    if manifest.state != declared:
        raise SavepointError("savepoint", f"{where} keeps each key's state as ({manifest.state}), and "
                             f"pipeline/query.py's answer keeps it as ({declared}): restored, the state would not "
                             "fit. Put the old answer back to resume from it.")
    if manifest.config.get("input_topic") != config.input_topic:
        raise SavepointError("input_topic", f"{config.input_topic!r}, but savepoint {where} holds offsets of "
                             f"{manifest.config.get('input_topic')!r}")
    newer = {shard: batch for shard, batch in markers_then.items() if batch > manifest.batch_id}
    if newer:
        raise SavepointError("savepoint", f"{where} was taken at batch {manifest.batch_id}, but sink "
                             f"{manifest.sink_id!r} published up to batch {max(newer.values())} since: the savepoint "
                             "is older than the output. Take a new savepoint of the job that published them.")
    if markers_next:
        raise SavepointError("savepoint", f"a job already started from {where} and published batches as sink "
                             f"{generation_sink_id(manifest.config['sink_id'], manifest.generation + 1)!r}; a second "
                             "start would publish its answers again. Resume that job's checkpoint, or take a new "
                             "savepoint of it.")


def start_from(spark, config: JobConfig, path: str, manifest: Manifest) -> Origin:
    """Prepare a new checkpoint to start from the savepoint (checked by check_restorable):
    the savepoint's state copied in as the first batch's seed, then the origin file. Once
    the origin file is there, `run` resumes this checkpoint like any other."""
    location = resolve_location(config.checkpoint_location)
    if not checkpoint.is_new(location):
        raise SavepointError("checkpoint_location", f"{location} already holds a job's checkpoint; a savepoint "
                             "starts a new one: point checkpoint_location at an empty path")
    fs, base = filesystem(location)
    seed = f"{location.rstrip('/')}/{SEED_DIR}"
    if exists(fs, f"{base}/{SEED_DIR}"):
        fs.delete_dir(f"{base}/{SEED_DIR}")  # left by a start cut short before its origin file
    state = spark.read.schema(state_schema(config)).parquet(f"{resolve_location(path).rstrip('/')}/{STATE_DIR}")
    if config.state_ttl_seconds > 0:  # what a restart of the old checkpoint now would have forgotten
        state = state.where(f"expires_at_ms IS NULL OR expires_at_ms > {int(time.time() * 1000)}")
    state.coalesce(1).write.parquet(seed)
    _maybe_crash("SAVEPOINT_SEED_COPIED")
    fs_savepoint, savepoint_base = filesystem(path)
    origin = Origin(
        savepoint=resolve_location(path),
        manifest_sha256=hashlib.sha256(read_bytes(fs_savepoint, f"{savepoint_base}/{MANIFEST}")).hexdigest(),
        generation=manifest.generation + 1,
        sink_id=generation_sink_id(manifest.config["sink_id"], manifest.generation + 1),
        starting_offsets=json.dumps(manifest.source_offsets),
        first_batch_id=manifest.first_batch_id + manifest.batch_id + 1,
    )
    write_atomic(fs, f"{base}/{ORIGIN_FILE}", json.dumps(dataclasses.asdict(origin), indent=1).encode())
    return origin


def _maybe_crash(point: str) -> None:
    from ..sink import faults

    faults.maybe_crash(getattr(faults, point), 0)
