"""Starting a new checkpoint from a savepoint: what is refused, and the start itself."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time

from ..config import JobConfig
from ..sink import faults
from ..storage import checkpoint
from ..storage.files import exists, filesystem, read_bytes, resolve_location, write_atomic
from .manifest import (
    MANIFEST,
    MEANING,
    QUERY_FINGERPRINT,
    STATE_DIR,
    Manifest,
    SavepointError,
    declared_state,
    state_schema,
)
from .origin import ORIGIN_FILE, SEED_DIR, Origin, generation_sink_id


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
    faults.maybe_crash(faults.SAVEPOINT_SEED_COPIED, 0)
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
