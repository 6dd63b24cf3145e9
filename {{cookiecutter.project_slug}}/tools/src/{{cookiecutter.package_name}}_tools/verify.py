"""An independent check of what a read_committed consumer sees, against what the input
says the output must be. Used by the tests, the chaos runner and the benchmarks."""

from __future__ import annotations

import base64
import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .readback import Published


@dataclass
class Verdict:
    lost: int = 0  # counts short of the expectation, summed over keys
    duplicated: int = 0  # a (key, batch) published twice, or a count above the expectation
    not_increasing: int = 0  # a key's published count that did not grow
    wrong_counts: int = 0  # a (key, batch) whose count is not what the input up to that batch says
    missing_updates: int = 0  # a key the input changed in a batch, with no record of that batch
    dead_letter_ok: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return (self.lost == 0 and self.duplicated == 0 and self.not_increasing == 0 and self.wrong_counts == 0
                and self.missing_updates == 0 and self.dead_letter_ok)


def verify(published: Published, expected_counts: dict[str, int], malformed_values: list[bytes]) -> Verdict:
    verdict = Verdict()
    for key in sorted(set(published.counts) | set(expected_counts)):
        history = published.counts.get(key, [])
        batches = Counter(batch for batch, _ in history)
        repeats = sum(n - 1 for n in batches.values())
        final = history[-1][1] if history else 0
        wanted = expected_counts.get(key, 0)
        verdict.duplicated += repeats + max(0, final - wanted)
        verdict.lost += max(0, wanted - final)
        verdict.not_increasing += sum(1 for (_, a), (_, b) in itertools.pairwise(history) if b <= a)
        if repeats or final != wanted:
            verdict.problems.append(f"key {key!r}: final {final}, expected {wanted}, batches repeated {repeats}")
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


def verify_batches(verdict: Verdict, published: Published, records: Iterable[tuple[int, int, bytes | None]],
                   counted_key: Callable[[bytes | None], str | None], batch_ends: dict[int, dict[int, int]]) -> Verdict:
    """Every intermediate count, batch by batch: batch N covers the input below its end offsets
    (Spark's `offsets/N`), so after N each key's count is the number of its counted input
    records there. A published (key, N) must say exactly that, and every key whose count
    changed in N must have a record of N: a batch skipped, or published from other ranges,
    is seen here even when later batches bring the final counts right.

    `records` are the input's (partition, offset, value), read back independently;
    `counted_key` says which key a value counts for (None: malformed or filtered out)."""
    keyed = [(partition, offset, key) for partition, offset, value in records
             if (key := counted_key(value)) is not None]
    published_in: dict[int, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    for key, history in published.counts.items():
        for batch, count in history:
            published_in[batch][key].add(count)
    previous: Counter[str] = Counter()
    for batch in sorted(batch_ends):
        ends = batch_ends[batch]
        expected = Counter(key for partition, offset, key in keyed if offset < ends.get(partition, 0))
        for key in sorted(set(expected) | set(published_in[batch])):
            counts = published_in[batch].get(key)
            if counts is None:
                if expected[key] != previous[key]:
                    verdict.missing_updates += 1
                    verdict.problems.append(f"key {key!r}: no record of batch {batch}, whose input took its "
                                            f"count from {previous[key]} to {expected[key]}")
                continue
            wrong = {c for c in counts if c != expected[key]}
            if wrong:
                verdict.wrong_counts += 1
                verdict.problems.append(f"key {key!r}, batch {batch}: published {sorted(counts)}, the input up to "
                                        f"that batch says {expected[key]}")
        previous = expected
    return verdict


def judge(published: Published, expected_counts: dict[str, int], malformed_values: list[bytes],
          records: Iterable[tuple[int, int, bytes | None]], counted_key: Callable[[bytes | None], str | None],
          batch_ends: dict[int, dict[int, int]]) -> Verdict:
    """The whole verdict on a run, as the tests and the chaos runner give it: the final counts and
    the dead letters (verify), then every intermediate count batch by batch (verify_batches)."""
    return verify_batches(verify(published, expected_counts, malformed_values), published, records, counted_key,
                          batch_ends)
