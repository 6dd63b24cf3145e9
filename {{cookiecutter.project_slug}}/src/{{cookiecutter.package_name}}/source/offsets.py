"""Source offsets as Spark's offset log stores them, and the planning of one batch's range."""

from __future__ import annotations

from dataclasses import dataclass

# One topic per source, so an offset is simply {"<partition>": <next offset to read>}.
Offsets = dict[str, int]


class OffsetsLost(RuntimeError):
    """Records the job has not read yet were deleted (retention, truncation)."""


@dataclass(frozen=True)
class PartitionRange:
    partition: int
    start: int  # first offset to read
    end: int  # offset after the last one to read (a last stable offset)


def plan_end(start: Offsets, latest: Offsets, max_records: int | None) -> Offsets:
    """End offsets for the next batch: everything available, or at most `max_records`
    shared fairly across partitions (a partition with less backlog leaves its share to others)."""
    end = {p: max(start.get(p, 0), latest[p]) for p in latest}
    if max_records is None:
        return end
    backlog = {p: end[p] - start.get(p, 0) for p in end}
    budget = max_records
    planned = {p: start.get(p, 0) for p in end}
    pending = sorted((p for p in end if backlog[p] > 0), key=lambda p: backlog[p])
    while pending and budget > 0:
        share = max(1, budget // len(pending))
        partition = pending.pop(0)
        take = min(backlog[partition], share, budget)
        planned[partition] += take
        budget -= take
    return planned


def check_not_lost(start: Offsets, earliest: Offsets, fail_on_data_loss: bool) -> Offsets:
    """Start offsets that still exist: fail if records were deleted before they were read,
    unless the user chose to continue from the earliest offset still there."""
    checked = dict(start)
    for partition, offset in start.items():
        low = earliest.get(partition, 0)
        if offset < low:
            if fail_on_data_loss:
                raise OffsetsLost(
                    f"partition {partition}: offsets {offset}..{low - 1} no longer exist in Kafka (deleted by "
                    "retention or truncation) and were never read. Set fail_on_data_loss = false to continue "
                    f"from offset {low}, accepting that those records are lost."
                )
            checked[partition] = low
    return checked
