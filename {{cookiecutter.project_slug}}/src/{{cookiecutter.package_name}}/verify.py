"""An independent check of what a read_committed consumer sees, against what the input
says the output must be. Used by the tests, the chaos runner and the benchmarks."""

from __future__ import annotations

import base64
import itertools
from collections import Counter
from dataclasses import dataclass, field

from .readback import Published


@dataclass
class Verdict:
    lost: int = 0  # counts short of the expectation, summed over keys
    duplicated: int = 0  # a (key, batch) published twice, or a count above the expectation
    not_increasing: int = 0  # a key's published count that did not grow
    dead_letter_ok: bool = True
    problems: list[str] = field(default_factory=list)

    @property
    def exactly_once(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.not_increasing == 0 and self.dead_letter_ok


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
