"""Recovery as values. What each commit shard's batch marker says (ShardState), and what the
coordinator does with batch N given that, the sink log and the checkpoint (`decide`: a pure
function, no I/O). coordinator.commit_batch reads what `decide` needs, asks it, and does what
the Decision says; each case of recovery is a call of `decide` in tests/unit/test_recovery.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from ..storage.checkpoint import SourceOffsets
from .marker import NO_BATCH, Marker
from .sink_log import COMMITTED, DIGESTS_WITH_BATCH_ID, LogEntry


@dataclass(frozen=True)
class ShardState:
    """A commit shard's settled state: the last batch its marker says it published, and the
    digest of that batch's source offsets (SourceOffsets.digest). Read when the shard's producer
    starts, once its init_transactions has fenced any older producer and settled its transaction;
    each commit of the shard then gives a new one (ProducerPool.record)."""

    shard: int
    transactional_id: str
    batch_id: int = NO_BATCH
    source_offsets: str = ""
    went_back_to: int | None = None  # a later marker of the shard named this lower batch (Marker.went_back_to)

    @classmethod
    def of_marker(cls, shard: int, transactional_id: str, marker: Marker | None) -> ShardState:
        """What the shard's marker says; a shard without one has published nothing."""
        if marker is None:
            return cls(shard, transactional_id)
        return cls(shard, transactional_id, marker.batch_id, marker.source_offsets, marker.went_back_to)


class MarkerFacts(Protocol):
    """What a marker says of the last batch it published (a Marker, a ShardState)."""

    @property
    def batch_id(self) -> int: ...

    @property
    def source_offsets(self) -> str: ...

    @property
    def went_back_to(self) -> int | None: ...


def markers_gone_back(markers: Mapping[int, MarkerFacts]) -> dict[int, MarkerFacts]:
    """The shards a later marker of which named a lower batch than an earlier one, in shard order.
    Each shard's producer writes its markers in batch order and a batch is never published again
    where its marker has it, so markers only move forward: one that went back was written by
    another writer (another job on this sink's ids, a tool), and what they say cannot be trusted."""
    return {shard: marker for shard, marker in sorted(markers.items()) if marker.went_back_to is not None}


class Fate(Enum):
    """What a shard's marker says of batch N, from source offsets O (the digest of `offsets/N`)."""

    PUBLISH = "publish"  # the marker is behind N: the shard publishes N
    PUBLISHED_BEFORE = "published before"  # at N from O: the shard published N before a crash, nothing again
    # Past N, or at N from other offsets than O. Spark plans batch N+1 only once N's commit is
    # written, so while N runs no marker can be past N, nor can a marker at N come from other
    # offsets, unless the checkpoint is older than the output (restored from a copy, or a second
    # checkpoint under the same sink id): an error, never a skip.
    AHEAD = "ahead"


def fate(marker: MarkerFacts, batch_id: int, source_offsets: str) -> Fate:
    """Batch `batch_id`'s fate in a shard whose marker is `marker`, for its run from `source_offsets`:
    the coordinator asks it of every shard, a publishing task of its own, the start-up check of the
    checkpoint's last planned batch."""
    if marker.batch_id > batch_id or (marker.batch_id == batch_id and marker.source_offsets != source_offsets):
        return Fate.AHEAD
    return Fate.PUBLISHED_BEFORE if marker.batch_id == batch_id else Fate.PUBLISH


def markers_ahead(planned: int, source_offsets: str, markers: Mapping[int, MarkerFacts]) -> dict[int, MarkerFacts]:
    """The shards whose marker is AHEAD of batch `planned` run from `source_offsets`, in shard order."""
    return {shard: marker for shard, marker in sorted(markers.items())
            if fate(marker, planned, source_offsets) is Fate.AHEAD}


@dataclass(frozen=True)
class BatchFigures:
    """What batch N's run computed: per shard its rows and the digest of its records
    (batch_records.digests, as hex), and the source offsets it was computed from (`offsets/N`)."""

    rows_per_shard: tuple[int, ...]
    digests_per_shard: tuple[str, ...]
    source_offsets: SourceOffsets


class Action(Enum):
    MARKERS_WENT_BACK = "markers went back"  # an error: Decision.shards' markers named a lower batch later
    PUBLISH = "publish"  # the shards in Decision.shards publish the batch (none: each did before a crash)
    ALREADY_COMMITTED = "already committed"  # the log says so: publish nothing, write nothing
    CHECKPOINT_BEHIND_OUTPUT = "checkpoint behind output"  # an error: Decision.shards' markers are ahead
    SOURCE_OFFSETS_WENT_BACK = "source offsets went back"  # an error: Decision.problems name the partitions


@dataclass(frozen=True)
class Decision:
    """What the coordinator does with batch N. `rerun_mismatch`: the shards whose re-run differs
    from the first attempt's figures, to report (not an error); `published_before`: the shards
    whose marker already names N (they published it before a crash, and publish nothing again)."""

    action: Action
    shards: tuple[int, ...] = ()
    problems: tuple[str, ...] = ()
    rerun_mismatch: tuple[int, ...] = ()
    published_before: tuple[int, ...] = ()


def decide(batch_id: int, figures: BatchFigures, attempt: LogEntry | None, before: LogEntry | None,
           states: Sequence[ShardState]) -> Decision:
    """Batch N's fate. `attempt`: the sink log's entry for N, if an earlier run of N wrote one;
    `before`: the newest entry of a batch before N (an empty batch writes none); `states`:
    every shard's state. In order: markers that went back, or a marker ahead, stop the batch
    whatever the log says; a re-run is compared with the first attempt; a batch the log says
    committed publishes nothing; the shards whose marker is behind N publish it, provided the
    source offsets do not go back from the batch before's."""
    by_shard = {state.shard: state for state in states}
    if gone_back := markers_gone_back(by_shard):
        return Decision(Action.MARKERS_WENT_BACK, shards=tuple(gone_back))
    fates = {state.shard: fate(state, batch_id, figures.source_offsets.digest()) for state in states}
    if ahead := tuple(shard for shard, shard_fate in sorted(fates.items()) if shard_fate is Fate.AHEAD):
        return Decision(Action.CHECKPOINT_BEHIND_OUTPUT, shards=ahead)
    published_before = tuple(shard for shard, shard_fate in fates.items() if shard_fate is Fate.PUBLISHED_BEFORE)
    mismatch = () if attempt is None else rerun_mismatch(attempt, figures)
    if attempt is not None and attempt.status is COMMITTED:
        return Decision(Action.ALREADY_COMMITTED, rerun_mismatch=mismatch, published_before=published_before)
    pending = tuple(shard for shard, shard_fate in fates.items() if shard_fate is Fate.PUBLISH)
    if pending and before is not None and before.batch_id < batch_id \
            and (problems := figures.source_offsets.going_back_from(before.source_offsets)):
        return Decision(Action.SOURCE_OFFSETS_WENT_BACK, problems=tuple(problems), rerun_mismatch=mismatch,
                        published_before=published_before)
    return Decision(Action.PUBLISH, shards=pending, rerun_mismatch=mismatch, published_before=published_before)


def rerun_mismatch(first: LogEntry, rerun: BatchFigures) -> tuple[int, ...]:
    """A re-run of batch N computes from the same offsets and state, so a deterministic query
    gives the same records: the shards whose row count or digest differ from the first attempt's.
    An entry of layout 1 (sink_log.DIGESTS_WITH_BATCH_ID) holds digests of values with their batch
    id, which the sink stamps after hashing: a re-run against one is compared by row count alone."""
    comparable = first.format != DIGESTS_WITH_BATCH_ID
    first_figures = list(zip(first.records_per_shard, first.digests_per_shard, strict=True))

    def differs(shard: int, rows: int, digest: str) -> bool:
        if shard >= len(first_figures):
            return True
        first_rows, first_digest = first_figures[shard]
        return rows != first_rows or (comparable and digest != first_digest)

    return tuple(shard for shard, (rows, digest) in enumerate(zip(rerun.rows_per_shard, rerun.digests_per_shard,
                                                                   strict=True)) if differs(shard, rows, digest))
