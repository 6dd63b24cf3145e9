"""Read-only views of Spark's checkpoint: which batches are committed, with which offsets."""

from __future__ import annotations

import json

from .files import exists, filesystem, list_names, read_bytes


def _batch_ids(location: str, directory: str) -> list[int]:
    fs, base = filesystem(location)
    return sorted(int(name) for name in list_names(fs, f"{base}/{directory}") if name.isdigit())


def committed_batches(location: str) -> list[int]:
    """Batches Spark finished: `commits/N` is written after the sink's commit returned."""
    return _batch_ids(location, "commits")


def commit_time(location: str, batch_id: int) -> float | None:
    """When Spark wrote `commits/N` (epoch seconds): the batch's end, as the storage recorded it."""
    fs, base = filesystem(location)
    info = fs.get_file_info(f"{base}/commits/{batch_id}")
    return None if info.mtime is None else info.mtime.timestamp()


def planned_batches(location: str) -> list[int]:
    return _batch_ids(location, "offsets")


def batch_offsets(location: str, batch_id: int) -> list[dict]:
    """The source offsets of batch N from `offsets/N` (a version line, metadata, one line per source)."""
    fs, base = filesystem(location)
    path = f"{base}/offsets/{batch_id}"
    if not exists(fs, path):
        return []
    lines = read_bytes(fs, path).decode().splitlines()
    return [json.loads(line) for line in lines[2:] if line.strip() and line.strip() != "-"]


def input_offsets(location: str, batch_id: int, topic: str) -> dict[str, int]:
    """Where batch N ends in `topic`: {"<partition>": next offset to read}, from the line that
    Spark's Kafka source wrote ({"<topic>": {"<partition>": offset}})."""
    for source in batch_offsets(location, batch_id):
        if isinstance(source, dict) and isinstance(source.get(topic), dict):
            return {str(partition): int(offset) for partition, offset in source[topic].items()}
    return {}


def initial_offsets(location: str, topic: str) -> dict[str, int]:
    """Where the checkpoint's first batch starts in `topic`: the offsets Spark's Kafka source
    resolved `startingOffsets` to (`sources/0/0`: a zero byte, a version line, the JSON)."""
    fs, base = filesystem(location)
    path = f"{base}/sources/0/0"
    if not exists(fs, path):
        return {}
    text = read_bytes(fs, path).decode().lstrip("\x00")
    offsets = json.loads(text.split("\n", 1)[1]).get(topic, {})
    return {str(partition): int(offset) for partition, offset in offsets.items()}


def batch_range(location: str, batch_id: int, topic: str) -> tuple[dict[str, int], dict[str, int]]:
    """Batch N's input in `topic`: from where batch N-1 ended (or the initial offsets) to where N
    ends, per partition. A partition absent from the start is new: it starts at its earliest."""
    end = input_offsets(location, batch_id, topic)
    start = initial_offsets(location, topic) if batch_id == 0 else input_offsets(location, batch_id - 1, topic)
    if not end or (batch_id > 0 and not start):
        raise RuntimeError(f"checkpoint {location}: no offsets of batch {batch_id} (or of the one before it) "
                           f"for {topic!r}")
    return start, end


def batch_ends(location: str, topic: str) -> dict[int, dict[int, int]]:
    """Where each batch Spark committed ends in `topic`: {batch: {partition: end offset}}."""
    return {batch: {int(p): end for p, end in input_offsets(location, batch, topic).items()}
            for batch in committed_batches(location)}


def is_new(location: str) -> bool:
    return not planned_batches(location)
