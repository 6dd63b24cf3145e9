"""Read-only views of Spark's checkpoint: which batches are committed, with which offsets."""

from __future__ import annotations

import json

from .storage import exists, filesystem, list_names, read_bytes


def _batch_ids(location: str, directory: str) -> list[int]:
    fs, base = filesystem(location)
    return sorted(int(name) for name in list_names(fs, f"{base}/{directory}") if name.isdigit())


def committed_batches(location: str) -> list[int]:
    """Batches Spark finished: `commits/N` is written after the sink's commit returned."""
    return _batch_ids(location, "commits")


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


def batch_ends(location: str, topic: str) -> dict[int, dict[int, int]]:
    """Where each batch Spark committed ends in `topic`: {batch: {partition: end offset}}."""
    return {batch: {int(p): end for p, end in input_offsets(location, batch, topic).items()}
            for batch in committed_batches(location)}


def is_new(location: str) -> bool:
    return not planned_batches(location)
