"""The differential oracle: what a faulted run published, against what the same job publishes
from the same input without faults (the reference run). It knows nothing of the query, so it
keeps its meaning when a team changes the query; each shape's own model (verify.py) checks the
query itself beside it.

Micro-batch boundaries: Spark plans a batch from where the last one ended and what the input
holds. With every event produced before either run starts and the same
`max_offsets_per_trigger`, a restarted run re-runs a crashed batch over the offsets it logged
for it (`offsets/N`) and plans the next ones as a clean run would, so the two runs' batches
are the same and their output compares record by record, batch by batch (batch ids, dead letters
and every intermediate value included). The two checkpoints' offset logs say whether that held
(`same_plan`, over the batches that read input: a query whose operator has timers, the windowed
count's, gets a batch at every trigger without input too, which publishes nothing, and how many
of those a run has depends on its timing). Where it did not (input produced while a run ran),
only what does not depend on the boundaries is compared, each value without its batch id (a
record's headers, where the query keeps its input's, are compared as a part of it):
- an upsert output (query.OUTPUT): the last value per key, and no key twice in one batch;
- an append output: the multiset of records;
- dead letters: the set, none twice (a dead letter's key is its source coordinates).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from .readback import DEAD_LETTER, OUTPUT, Headers, Record

OutputKind = Literal["upsert", "append"]


@dataclass(frozen=True)
class Comparison:
    same_plan: bool  # both runs ran the same batches (their offset logs agree)
    difference: str | None  # None: the faulted run published what the reference run did


def batches_with_input(batch_ends: dict[int, dict[int, int]]) -> dict[int, dict[int, int]]:
    """A checkpoint's batches ({batch: {partition: end offset}}) without those that read nothing:
    their ends are the batch before's."""
    kept, previous = {}, None
    for batch in sorted(batch_ends):
        if batch_ends[batch] != previous:
            kept[batch] = batch_ends[batch]
        previous = batch_ends[batch]
    return kept


def difference(faulted: list[Record], reference: list[Record], kind: OutputKind, same_plan: bool) -> str | None:
    """How the faulted run's output differs from the reference run's, first difference first; None
    where it does not."""
    if same_plan:
        return _record_by_record(faulted, reference)
    return _boundary_free(faulted, reference, kind)


def _record_by_record(faulted: list[Record], reference: list[Record]) -> str | None:
    ours, theirs = Counter(faulted), Counter(reference)
    if ours == theirs:
        return None
    extra, missing = sorted((ours - theirs).elements()), sorted((theirs - ours).elements())
    first = min([*extra[:1], *missing[:1]])
    return (f"{len(extra)} records published that the reference run did not publish (duplicated or wrong), "
            f"{len(missing)} it published that are missing; the first, in batch {first.batch}: "
            f"{'extra' if first in extra else 'missing'} {first.role} record {first.key!r}: {first.value!r}")


def _boundary_free(faulted: list[Record], reference: list[Record], kind: OutputKind) -> str | None:
    problems = [*_repeated(faulted, kind)]
    ours, theirs = _answer(faulted, kind), _answer(reference, kind)
    if ours != theirs:
        extra, missing = sorted((ours - theirs).elements()), sorted((theirs - ours).elements())
        problems.append(f"{len(extra)} answers that the reference run does not give, {len(missing)} missing; "
                        f"e.g. extra {extra[:1]}, missing {missing[:1]}")
    return "; ".join(problems) or None


def _answer(records: list[Record], kind: OutputKind) -> Counter[tuple[str, bytes, str, Headers]]:
    """What the output says whatever the boundaries: upsert outputs their last value per key, append
    outputs every record; dead letters one each."""
    dead_letters = Counter({record.without_batch_id() for record in records if record.role == DEAD_LETTER})
    outputs = [record for record in records if record.role == OUTPUT]
    if kind == "append":
        return Counter(record.without_batch_id() for record in outputs) + dead_letters
    last: dict[bytes, Record] = {}
    for record in outputs:  # in each partition's order, and a key has one partition
        if record.key not in last or record.batch >= last[record.key].batch:
            last[record.key] = record
    return Counter(record.without_batch_id() for record in last.values()) + dead_letters


def _repeated(records: Iterable[Record], kind: OutputKind) -> list[str]:
    """Keys published twice where once is the rule: an upsert key twice in one batch, a dead letter twice."""
    seen = Counter((record.role, record.key, record.batch if record.role == OUTPUT else None) for record in records
                   if record.role == DEAD_LETTER or kind == "upsert")
    repeats = sorted(what for what, n in seen.items() if n > 1)
    if not repeats:
        return []
    return [f"{len(repeats)} keys published more than once where once is the rule, e.g. {repeats[0]}"]
