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

from .readback import Answer, Published

Event = Mapping[str, object]
# The query's model: for each kept event, in order, the key whose answer it changes and the new answer.
Model = Callable[[Iterable[Event]], Iterator[tuple[str, Answer]]]
Positioned = tuple[int, int, bytes | None]  # an input record: (partition, offset, value)


@dataclass
class Verdict:
    lost: int = 0  # keys whose last published answer is missing or not the model's
    duplicated: int = 0  # a (key, batch) published twice, or a key the model gives no answer for
    wrong_answers: int = 0  # a (key, batch) whose answer is not the model's after the input up to that batch
    missing_updates: int = 0  # a key whose answer the input changed in a batch, with no record of that batch
    dead_letter_ok: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return (self.lost == 0 and self.duplicated == 0 and self.wrong_answers == 0 and self.missing_updates == 0
                and self.dead_letter_ok)


def expected_answers(model: Model, events: Iterable[Event]) -> dict[str, Answer]:
    """Each key's answer after all of `events` (the kept ones, in input order)."""
    return {key: _plain(answer) for key, answer in model(events)}


def verify(published: Published, expected: Mapping[str, Answer], malformed_values: list[bytes]) -> Verdict:
    """The last answer per key, no key twice in one batch, and the dead letters."""
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
                   model: Model) -> Verdict:
    """Every intermediate answer, batch by batch: batch N covers the input below its end offsets
    (Spark's `offsets/N`), so after N each key's answer is the model's after the kept input there.
    A published (key, N) must say exactly that, and every key whose answer changed in N must have
    a record of N: a batch skipped, or published from other ranges, is seen here even when later
    batches bring the final answers right.

    `records` are the input's (partition, offset, value), read back independently; `kept_event`
    parses a value the filter keeps (None: malformed or filtered out)."""
    in_batches = _by_batch(records, kept_event, batch_ends)
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
                if answers.get(key) != previous.get(key):
                    verdict.missing_updates += 1
                    verdict.problems.append(f"key {key!r}: no record of batch {batch}, whose input took its "
                                            f"answer from {previous.get(key)} to {answers.get(key)}")
                continue
            if any(answer != answers.get(key) for answer in found):
                verdict.wrong_answers += 1
                verdict.problems.append(f"key {key!r}, batch {batch}: published {found}, the input up to "
                                        f"that batch says {answers.get(key)}")
    return verdict


def judge(published: Published, expected: Mapping[str, Answer], malformed_values: list[bytes],
          records: Iterable[Positioned], kept_event: Callable[[bytes | None], Event | None],
          batch_ends: dict[int, dict[int, int]], model: Model) -> Verdict:
    """The whole verdict on a run, as the tests and the chaos runner give it: the last answers and
    the dead letters (verify), then every intermediate answer batch by batch (verify_batches)."""
    return verify_batches(verify(published, expected, malformed_values), published, records, kept_event,
                          batch_ends, model)


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


def _plain(answer: Answer) -> Answer:
    """An answer as a JSON reader sees it (tuples as lists, no non-JSON types)."""
    return json.loads(json.dumps(answer))
