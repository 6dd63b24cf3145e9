"""The chaos run's verdict: what a read_committed consumer sees, against what the input topic
itself says the output must be. It shares nothing with the job but the topic names and the
query's model (pipeline/query.py), and the judgement is the tests' own (verify.judge)."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..value_formats import JSON, Values
from ..verify import Event, Expected, Model, OutputKind, Verdict, judge

# The last line of a run, for machines (the tests read it).
VERDICT_LINE = re.compile(
    r"^chaos: seed=(?P<seed>\d+) guarantee=(?P<guarantee>[a-z-]+) records=(?P<records>\d+) kills=(?P<kills>\d+) "
    r"broker_restarts=(?P<broker_restarts>\d+) faults=(?P<faults>\d+) lost=(?P<lost>\d+) "
    r"duplicated=(?P<duplicated>\d+) dead_letter_ok=(?P<dead_letter_ok>true|false)$"
)
EXCLUDED_KEY = "orange"  # the run's own filter drops it, whatever the configured one


@dataclass
class Tally:
    kills: int = 0  # driver process group killed: by a fault point or from outside
    faults: int = 0
    fault_points: Counter[str] = field(default_factory=Counter)
    worker_kills: int = 0
    broker_restarts: int = 0
    s3_restarts: int = 0
    query_restarts: int = 0  # in-process restarts by the runner's restart strategy
    unexpected_exits: int = 0
    runs: int = 0
    output_kills: int = 0  # of the kills: the moment the run's first output was visible
    broker_faults: Counter[str] = field(default_factory=Counter)  # by kind (plan.BROKER_FAULTS)
    zombies: int = 0  # zombie drivers woken ...
    zombie_failures: list[str] = field(default_factory=list)  # ... that did not stop as they must
    input_growths: int = 0
    aborted_input: int = 0  # input records in aborted transactions

    def summary(self) -> str:
        points = ", ".join(f"{p}={n}" for p, n in sorted(self.fault_points.items()))
        brokers = ", ".join(f"{kind}={n}" for kind, n in sorted(self.broker_faults.items()))
        return (f"runs={self.runs} kills={self.kills} (output_kills={self.output_kills}) faults={self.faults} "
                f"({points}) worker_kills={self.worker_kills} query_restarts={self.query_restarts} "
                f"broker_restarts={self.broker_restarts} ({brokers}) s3_restarts={self.s3_restarts} "
                f"zombies={self.zombies} (failed: {len(self.zombie_failures)}) input_growths={self.input_growths} "
                f"aborted_input={self.aborted_input} unexpected_exits={self.unexpected_exits}")


def kept_event(key_field: str, malformed: set[bytes], events: Values = JSON) -> Callable[[bytes | None], Event | None]:
    """An input value as an event (in the input's format, `events`), if the run's filter keeps it;
    None: malformed or filtered out."""
    def parse(value: bytes | None) -> Event | None:
        if value is None or value in malformed:
            return None
        event = events.event(value)
        return None if event[key_field] == EXCLUDED_KEY else event

    return parse


def expectation(values: Iterable[bytes | None], kept: Callable[[bytes | None], Event | None], malformed: set[bytes],
                model: Model, kind: OutputKind) -> tuple[Expected, list[bytes]]:
    """The output (the query's model over the kept events, as its kind reads it) and the dead
    letters that the input read back calls for."""
    values = list(values)
    events = [event for value in values if (event := kept(value)) is not None]
    return Expected.of(model, events, kind), [value for value in values if value is not None and value in malformed]


def retried(read: Callable[[], Any], say: Callable[[str], None], attempts: int = 3) -> Any:
    """A read-back that a broker still settling after a restart may fail, tried again."""
    for attempt in range(1, attempts + 1):
        try:
            return read()
        except (RuntimeError, TimeoutError) as error:
            if attempt == attempts:
                raise
            say(f"reading back failed ({error}); again in 10s")
            time.sleep(10)
    raise AssertionError("unreachable")


def judge_run(positioned: list[tuple[int, int, bytes | None]], published: Any, malformed_values: list[bytes],
              key_field: str, batch_ends: dict[int, dict[int, int]], say: Callable[[str], None], model: Model,
              kind: OutputKind, events: Values = JSON) -> tuple[Verdict, int]:
    """The verdict on the output, and the number of records the input topic holds (`events`: its format)."""
    malformed = set(malformed_values)
    kept = kept_event(key_field, malformed, events)
    expected, malformed_read = expectation((value for _p, _o, value in positioned), kept, malformed, model, kind)
    verdict = judge(published, expected, malformed_read, positioned, kept, batch_ends, model)
    say(f"verify (read_committed): {published.records()} output records for {len(published.answers)} keys over "
        f"{len(published.batches())} batches, {len(published.dead_letters)} dead letters ({len(malformed_read)} "
        f"malformed records in the input); wrong_answers={verdict.wrong_answers} "
        f"missing_updates={verdict.missing_updates}")
    for problem in verdict.problems[:10]:
        say(f"  problem: {problem}")
    if len(verdict.problems) > 10:
        say(f"  ... {len(verdict.problems) - 10} more problems")
    return verdict, len(positioned)


def verdict_line(seed: int, guarantee: str, records: int, tally: Tally, verdict: Verdict) -> str:
    return (f"chaos: seed={seed} guarantee={guarantee} records={records} kills={tally.kills} "
            f"broker_restarts={tally.broker_restarts} faults={tally.faults} lost={verdict.lost} "
            f"duplicated={verdict.duplicated} dead_letter_ok={str(verdict.dead_letter_ok).lower()}")
