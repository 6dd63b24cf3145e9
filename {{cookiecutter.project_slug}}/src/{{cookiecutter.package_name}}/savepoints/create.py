"""Taking a savepoint of a stopped job's checkpoint."""

from __future__ import annotations

import time

from ..config import JobConfig
from ..sink import faults
from ..storage import checkpoint
from ..storage.files import exists, filesystem, list_names, resolve_location, write_atomic
from .manifest import (
    FORMAT_VERSION,
    MANIFEST,
    MEANING,
    QUERY_FINGERPRINT,
    RECORDED,
    STATE_DIR,
    Manifest,
    SavepointError,
    declared_state,
    sha256,
)
from .origin import read_origin
from .state import read_state


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
    faults.maybe_crash(faults.SAVEPOINT_STATE_WRITTEN, 0)
    files = []
    for name in sorted(list_names(fs, f"{base}/{STATE_DIR}")):
        if name.endswith(".parquet"):
            digest, size = sha256(fs, f"{base}/{STATE_DIR}/{name}")
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
