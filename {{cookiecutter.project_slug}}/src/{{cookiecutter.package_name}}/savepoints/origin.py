"""Where a checkpoint started from a savepoint came from (`<checkpoint>/savepoint-origin.json`),
and what that changes for the job: its generation's sink id, the savepoint's offsets, the seed its
first batch reads, the batch ids its output continues from."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from ..config import JobConfig
from ..storage.files import exists, filesystem, read_bytes, resolve_location

# In a checkpoint started from a savepoint: where it came from, and the seed the first batch reads.
ORIGIN_FILE = "savepoint-origin.json"
SEED_DIR = "savepoint-seed"


@dataclass(frozen=True)
class Origin:
    """What a checkpoint started from a savepoint keeps (`<checkpoint>/savepoint-origin.json`)."""

    savepoint: str
    manifest_sha256: str
    generation: int
    sink_id: str  # the generation's sink id: markers, transactional ids, sink log
    starting_offsets: str  # Spark's JSON form, the savepoint's offsets
    first_batch_id: int  # the batch id the output records of this checkpoint's batch 0 carry


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


def seed_location(config: JobConfig, origin: Origin | None) -> str | None:
    """The savepoint's state the checkpoint's first batch reads, or None (not from a savepoint)."""
    if origin is None:
        return None
    return f"{resolve_location(config.checkpoint_location).rstrip('/')}/{SEED_DIR}"
