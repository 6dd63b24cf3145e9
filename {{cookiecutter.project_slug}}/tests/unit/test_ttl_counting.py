from __future__ import annotations

import pandas as pd

from {{ cookiecutter.package_name }}.pipeline.changes import KIND_ANSWER, KIND_DEAD_LETTER
from {{ cookiecutter.package_name }}.pipeline.ttl_counting import CountProcessor


class FakeValueState:
    def __init__(self) -> None:
        self.value: tuple | None = None

    def exists(self) -> bool:
        return self.value is not None

    def get(self) -> tuple | None:
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value


class FakeHandle:
    def __init__(self) -> None:
        self.states: dict[str, FakeValueState] = {}
        self.ttls: dict[str, int | None] = {}

    def getValueState(self, name: str, schema: str, ttl: int | None = None) -> FakeValueState:
        self.ttls[name] = ttl
        return self.states.setdefault(name, FakeValueState())


def frames(*sizes: int):
    return iter(pd.DataFrame({"color": ["red"] * n}) for n in sizes)


def test_counts_accumulate_across_batches_and_only_the_key_is_emitted():
    processor = CountProcessor()
    handle = FakeHandle()
    processor.init(handle)
    first = pd.concat(processor.handleInputRows(("red",), frames(2, 3), None))
    second = pd.concat(processor.handleInputRows(("red",), frames(4), None))
    assert first[["kind", "key", "count"]].values.tolist() == [[KIND_ANSWER, "red", 5]]
    assert second["count"].tolist() == [9]
    assert handle.ttls["count"] is None


def test_ttl_is_passed_in_milliseconds():
    handle = FakeHandle()
    CountProcessor(ttl_seconds=60).init(handle)
    assert handle.ttls["count"] == 60_000


def test_dead_letters_pass_through_untouched():
    processor = CountProcessor()
    processor.init(FakeHandle())
    dead = pd.DataFrame({"group_key": [None], "dead_letter_key": ["events/2/17"],
                         "dead_letter_value": ['{"reason": "not JSON: x"}']})
    out = pd.concat(processor.handleInputRows((None,), iter([dead]), None))
    row = out.iloc[0]
    assert (row["kind"], row["key"], row["dead_letter_value"]) == (
        KIND_DEAD_LETTER, "events/2/17", '{"reason": "not JSON: x"}')
