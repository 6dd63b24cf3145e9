"""An independent check of what a read_committed consumer sees, against what the input says the
output must be: the query's model (pipeline/query.py's `model`, the query in plain Python) run
over the input read back with its offsets, batch by batch. Used by the tests and the chaos
runner. Nothing here knows what the query computes: a team that changes the query changes its
model beside it, and this check holds the job to the new one. Beside it, the differential oracle
(differential.py) compares a faulted run with a run without faults."""

from __future__ import annotations

import base64
import bisect
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from .readback import Answer, Published

Event = Mapping[str, object]
# The query's model: for each kept event, in order, the key whose answer it changes and the new answer.
Model = Callable[[Iterable[Event]], Iterator[tuple[str, Answer]]]
Positioned = tuple[int, int, bytes | None]  # an input record: (partition, offset, value)
# What the query's output means (pipeline/query.py's OUTPUT): "upsert", a key's last record its
# answer; "append", every record an answer of its own.
OutputKind = Literal["upsert", "append"]
Records = Counter[tuple[str, str]]  # an append output: (key, answer as JSON) -> how many times
SHOWN_RECORDS = 20  # an append output's verdict names this many records that differ, then counts the rest


@dataclass
class Verdict:
    """Upsert outputs are counted in keys and (key, batch) pairs; append outputs in records."""

    lost: int = 0  # keys whose last published answer is missing or not the model's; records missing
    duplicated: int = 0  # a (key, batch) published twice, or a key the model gives no answer for; records extra
    wrong_answers: int = 0  # a (key, batch) whose answer is not the model's after the input up to that batch;
    #                         records in a batch whose input does not give them
    missing_updates: int = 0  # a key whose answer the input changed in a batch, with no record of that batch;
    #                           records a batch's input gives that the batch does not have
    dead_letter_ok: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return (self.lost == 0 and self.duplicated == 0 and self.wrong_answers == 0 and self.missing_updates == 0
                and self.dead_letter_ok)


@dataclass(frozen=True)
class Expected:
    """What a read_committed reader must find after some input, as the output's kind reads it:
    each key's last answer (upsert), or every record, as many times as the model gives it (append)."""

    kind: OutputKind
    answers: dict[str, Answer] = field(default_factory=dict)  # upsert
    records: Records = field(default_factory=Counter)  # append

    @classmethod
    def of(cls, model: Model, events: Iterable[Event], kind: OutputKind) -> Expected:
        """The model over `events` (the kept ones, in input order)."""
        if kind == "append":
            return cls(kind, records=Counter((key, _json(answer)) for key, answer in model(events)))
        return cls(kind, answers=expected_answers(model, events))

    def met_by(self, published: Published) -> bool:
        """Whether the output says exactly this (a reader's view: no batch-by-batch check)."""
        if self.kind == "append":
            return published_records(published) == self.records
        return published.final_answers() == self.answers

    def keys(self) -> set[str]:
        """The keys the output must have a record of."""
        return set(self.answers) if self.kind == "upsert" else {key for key, _answer in self.records}


def expected_answers(model: Model, events: Iterable[Event]) -> dict[str, Answer]:
    """Each key's answer after all of `events` (the kept ones, in input order)."""
    return {key: _plain(answer) for key, answer in model(events)}


def published_records(published: Published) -> Records:
    """An append output as a multiset of (key, answer as JSON)."""
    return Counter((key, _json(answer)) for key, history in published.answers.items() for _batch, answer in history)


def records_per_key(records: Records) -> Counter[str]:
    """How many records each key has in an append output."""
    per_key: Counter[str] = Counter()
    for (key, _answer), times in records.items():
        per_key[key] += times
    return per_key


def verify(published: Published, expected: Expected, malformed_values: list[bytes]) -> Verdict:
    """The output as the kind reads it (upsert: the last answer per key, no key twice in one
    batch; append: every record once), and the dead letters."""
    verdict = _verify_records(published, expected.records) if expected.kind == "append" else \
        _verify_answers(published, expected.answers)
    return _verify_dead_letters(verdict, published, malformed_values)


def _verify_answers(published: Published, expected: Mapping[str, Answer]) -> Verdict:
    verdict = Verdict()
    for key in sorted(set(published.answers) | set(expected)):
        history = published.answers.get(key, [])
        repeats = sum(n - 1 for n in Counter(batch for batch, _ in history).values())
        final = history[-1][1] if history else None
        wanted = expected.get(key)
        verdict.duplicated += repeats + (wanted is None)
        verdict.lost += wanted is not None and final != wanted
        if repeats or final != wanted:
            verdict.problems.append(f"key {key!r}: last published {final}, expected {wanted}, "
                                    f"batches repeated {repeats}")
    return verdict


def _verify_records(published: Published, expected: Records) -> Verdict:
    verdict = Verdict()
    found = published_records(published)
    for record in sorted(set(found) | set(expected)):
        extra, missing = found[record] - expected[record], expected[record] - found[record]
        verdict.duplicated += max(extra, 0)
        verdict.lost += max(missing, 0)
        if (extra or missing) and len(verdict.problems) < SHOWN_RECORDS:
            verdict.problems.append(f"key {record[0]!r}: record {record[1]} published {found[record]} times, "
                                    f"expected {expected[record]}")
    if verdict.lost + verdict.duplicated > len(verdict.problems):
        verdict.problems.append(f"records: {verdict.lost} lost, {verdict.duplicated} duplicated in all")
    return verdict


def _verify_dead_letters(verdict: Verdict, published: Published, malformed_values: list[bytes]) -> Verdict:
    coordinates = Counter(
        (d["source_topic"], d["source_partition"], d["source_offset"]) for d in published.dead_letters
    )
    values = Counter(base64.b64decode(d["value_base64"]) for d in published.dead_letters)
    duplicated_dead = sum(n - 1 for n in coordinates.values())
    if duplicated_dead or values != Counter(malformed_values):
        verdict.dead_letter_ok = False
        verdict.problems.append(
            f"dead letters: {len(published.dead_letters)} published ({duplicated_dead} repeated), "
            f"{len(malformed_values)} malformed records were produced"
        )
    return verdict


def verify_batches(verdict: Verdict, published: Published, records: Iterable[Positioned],
                   kept_event: Callable[[bytes | None], Event | None], batch_ends: dict[int, dict[int, int]],
                   model: Model, kind: OutputKind = "upsert") -> Verdict:
    """Every intermediate answer, batch by batch: batch N covers the input below its end offsets
    (Spark's `offsets/N`), so after N each key's answer is the model's after the kept input there.
    A published (key, N) must say exactly that, and every key whose answer changed in N must have
    a record of N: a batch skipped, or published from other ranges, is seen here even when later
    batches bring the final answers right. An append output: batch N's records are exactly the
    model's over batch N's kept input.

    Spark keeps the offsets of its last batches only (`spark.sql.streaming.minBatchesToRetain`,
    100): the first batch it keeps holds, here, all the input below its end, since where it began
    is gone. Its answers are still judged (each is the model's over the input up to its end), but
    not which keys it changed; an append output's records of it and of the batches before it are
    judged together.

    `records` are the input's (partition, offset, value), read back independently; `kept_event`
    parses a value the filter keeps (None: malformed or filtered out)."""
    in_batches = _by_batch(records, kept_event, batch_ends)
    first_kept = min(batch_ends) if batch_ends and min(batch_ends) > 0 else None  # its start unknown
    if kind == "append":
        return _verify_batch_records(verdict, published, in_batches, batch_ends, model, first_kept)
    changed: dict[int, dict[str, Answer]] = defaultdict(dict)
    for (batch, _event), (key, answer) in zip(in_batches, model(event for _b, event in in_batches), strict=True):
        changed[batch][key] = _plain(answer)
    published_in: dict[int, dict[str, list[Answer]]] = defaultdict(lambda: defaultdict(list))
    for key, history in published.answers.items():
        for batch, answer in history:
            published_in[batch][key].append(answer)
    answers: dict[str, Answer] = {}
    for batch in sorted(batch_ends):
        previous = dict(answers)
        answers.update(changed[batch])
        for key in sorted(set(changed[batch]) | set(published_in[batch])):
            found = published_in[batch].get(key)
            if found is None:
                if answers.get(key) != previous.get(key) and batch != first_kept:
                    verdict.missing_updates += 1
                    verdict.problems.append(f"key {key!r}: no record of batch {batch}, whose input took its "
                                            f"answer from {previous.get(key)} to {answers.get(key)}")
                continue
            if any(answer != answers.get(key) for answer in found):
                verdict.wrong_answers += 1
                verdict.problems.append(f"key {key!r}, batch {batch}: published {found}, the input up to "
                                        f"that batch says {answers.get(key)}")
    return verdict


def _verify_batch_records(verdict: Verdict, published: Published, in_batches: list[tuple[int, Event]],
                          batch_ends: dict[int, dict[int, int]], model: Model, first_kept: int | None) -> Verdict:
    wanted: dict[int, Records] = defaultdict(Counter)
    for (batch, _event), (key, answer) in zip(in_batches, model(event for _b, event in in_batches), strict=True):
        wanted[batch][(key, _json(answer))] += 1
    found: dict[int, Records] = defaultdict(Counter)
    for key, history in published.answers.items():
        for batch, answer in history:
            found[max(batch, first_kept or 0)][(key, _json(answer))] += 1
    for batch in sorted(set(batch_ends) | set(found)):
        misplaced, missing = found[batch] - wanted[batch], wanted[batch] - found[batch]
        verdict.wrong_answers += misplaced.total()
        verdict.missing_updates += missing.total()
        if misplaced or missing:
            verdict.problems.append(f"batch {batch}: {misplaced.total()} records its input does not give "
                                    f"(first {next(iter(misplaced), None)}), {missing.total()} it gives missing "
                                    f"(first {next(iter(missing), None)})")
    return verdict


def judge(published: Published, expected: Expected, malformed_values: list[bytes],
          records: Iterable[Positioned], kept_event: Callable[[bytes | None], Event | None],
          batch_ends: dict[int, dict[int, int]], model: Model) -> Verdict:
    """The whole verdict on a run, as the tests and the chaos runner give it: the output and the
    dead letters (verify), then every intermediate answer batch by batch (verify_batches)."""
    return verify_batches(verify(published, expected, malformed_values), published, records, kept_event,
                          batch_ends, model, expected.kind)


def _by_batch(records: Iterable[Positioned], kept_event: Callable[[bytes | None], Event | None],
              batch_ends: dict[int, dict[int, int]]) -> list[tuple[int, Event]]:
    """The kept events of the batches Spark committed, in batch order, then partition and offset."""
    batches = sorted(batch_ends)
    ends = {partition: [batch_ends[b].get(partition, 0) for b in batches]
            for partition in {p for end in batch_ends.values() for p in end}}
    placed = []
    for partition, offset, value in sorted(records, key=lambda record: record[:2]):
        at = bisect.bisect_right(ends.get(partition, []), offset)  # the first batch ending past the offset
        if at < len(batches) and (event := kept_event(value)) is not None:
            placed.append((batches[at], partition, offset, event))
    placed.sort(key=lambda item: item[:3])
    return [(batch, event) for batch, _p, _o, event in placed]


def _json(answer: Answer) -> str:
    """An answer as one comparable text: its plain JSON, keys sorted."""
    return json.dumps(_plain(answer), sort_keys=True)


def _plain(answer: Answer) -> Answer:
    """An answer as a JSON reader sees it (tuples as lists, no non-JSON types)."""
    return json.loads(json.dumps(answer))
