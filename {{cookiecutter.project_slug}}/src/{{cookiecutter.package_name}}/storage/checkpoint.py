"""Read-only views of Spark's checkpoint: which batches are committed, with which offsets."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

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


# A Kafka source's offsets, as Spark writes and reports them: {"<topic>": {"<partition>": offset}}.
KafkaOffsets = dict[str, dict[str, int]]


def kafka_offsets(source: object) -> KafkaOffsets | None:
    """A Kafka source's offsets from what Spark wrote or reported for a source (JSON text, or
    parsed): {topic: {partition: offset}}. None for another kind of source (a file or rate
    source, whose offsets are no map of topics) or for what does not parse."""
    if isinstance(source, str):
        try:
            source = json.loads(source)
        except ValueError:
            return None
    if not isinstance(source, dict) or not all(isinstance(partitions, dict) for partitions in source.values()):
        return None
    try:
        return {str(topic): {str(partition): int(offset) for partition, offset in partitions.items()}
                for topic, partitions in source.items()}
    except (TypeError, ValueError):
        return None


def offsets_digest(source_offsets: object) -> str:
    return hashlib.sha256(json.dumps(source_offsets, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SourceOffsets:
    """A batch's source offsets, one per source as Spark's `offsets/N` has them, parsed once:
    `kafka` holds a Kafka source's as {topic: {partition: offset}} (None for another kind of
    source, which is kept as written and not compared). The sink log entry keeps `sources`, the
    batch marker their digest."""

    sources: tuple[Any, ...] = ()
    kafka: tuple[KafkaOffsets | None, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "kafka", tuple(kafka_offsets(source) for source in self.sources))

    @classmethod
    def of_batch(cls, location: str, batch_id: int) -> SourceOffsets:
        """Batch N's, from `offsets/N` (a version line, metadata, one line per source); none without it."""
        fs, base = filesystem(location)
        path = f"{base}/offsets/{batch_id}"
        if not exists(fs, path):
            return cls()
        lines = read_bytes(fs, path).decode().splitlines()
        return cls(tuple(json.loads(line) for line in lines[2:] if line.strip() and line.strip() != "-"))

    @classmethod
    def initial(cls, location: str) -> SourceOffsets:
        """Where the checkpoint's first batch starts: its Kafka source's resolved `startingOffsets`
        (`sources/0/0`: a zero byte, a version line, the JSON); none without it."""
        fs, base = filesystem(location)
        path = f"{base}/sources/0/0"
        if not exists(fs, path):
            return cls()
        return cls((json.loads(read_bytes(fs, path).decode().lstrip("\x00").split("\n", 1)[1]),))

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> SourceOffsets:
        """As the sink log entry keeps them: {"sources": [...]}."""
        return cls(tuple(value["sources"]))

    def to_json(self) -> dict[str, list[Any]]:
        return {"sources": list(self.sources)}

    def digest(self) -> str:
        """What a batch marker names: a re-run of the batch has the same, another batch of the
        same id (a checkpoint older than the output) another."""
        return offsets_digest(self.to_json())

    def topic(self, topic: str) -> dict[str, int]:
        """Where the batch ends in `topic`: {"<partition>": next offset to read}; {} if no source reads it."""
        return next((dict(source[topic]) for source in self.kafka if source is not None and topic in source), {})

    def records_since(self, earlier: SourceOffsets) -> int | None:
        """How many offsets lie between `earlier` and these, over every partition of every Kafka
        source (a batch's input records, transaction markers included); None where it cannot be
        told (another kind of source, a partition new since, no offsets)."""
        if not self.kafka or len(self.kafka) != len(earlier.kafka):
            return None
        total = 0
        for before, now in zip(earlier.kafka, self.kafka, strict=True):
            if before is None or now is None:
                return None
            for topic, partitions in now.items():
                for partition, offset in partitions.items():
                    if partition not in before.get(topic, {}):
                        return None
                    total += max(0, offset - before[topic][partition])
        return total

    def going_back_from(self, earlier: SourceOffsets) -> list[str]:
        """Per Kafka source, each partition whose offset is lower here than in `earlier`, or
        missing here. Sources of other kinds are not compared."""
        problems = []
        for before, now in zip(earlier.kafka, self.kafka, strict=False):
            if before is None or now is None:
                continue
            for topic, partitions in before.items():
                for partition, offset in partitions.items():
                    if partition not in now.get(topic, {}):
                        problems.append(f"{topic}/{partition} (at {offset}) is gone")
                    elif now[topic][partition] < offset:
                        problems.append(f"{topic}/{partition} went back from {offset} to {now[topic][partition]}")
        return problems


def input_offsets(location: str, batch_id: int, topic: str) -> dict[str, int]:
    """Where batch N ends in `topic`: {"<partition>": next offset to read}, from the line that
    Spark's Kafka source wrote ({"<topic>": {"<partition>": offset}})."""
    return SourceOffsets.of_batch(location, batch_id).topic(topic)


def initial_offsets(location: str, topic: str) -> dict[str, int]:
    """Where the checkpoint's first batch starts in `topic`: the offsets Spark's Kafka source
    resolved `startingOffsets` to (`sources/0/0`: a zero byte, a version line, the JSON)."""
    return SourceOffsets.initial(location).topic(topic)


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
