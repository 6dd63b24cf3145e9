from __future__ import annotations

import pandas as pd

from {{ cookiecutter.package_name }}.config import JobConfig
from {{ cookiecutter.package_name }}.pipeline import aggregates as agg
from {{ cookiecutter.package_name }}.pipeline.changes import KIND_ANSWER, KIND_DEAD_LETTER
from {{ cookiecutter.package_name }}.pipeline.ttl_counting import STATE_VARIABLE, AnswerProcessor, field_column


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


CONFIG = JobConfig(key_field="color", schema={"color": "string", "amount": "int"})
COUNT = agg.checked([agg.Count("count")], CONFIG)


def frames(*sizes: int):
    return iter(pd.DataFrame({"color": ["red"] * n}) for n in sizes)


def test_counts_accumulate_across_batches_and_only_the_key_is_emitted():
    processor = AnswerProcessor(COUNT)
    handle = FakeHandle()
    processor.init(handle)
    first = pd.concat(processor.handleInputRows(("red",), frames(2, 3), None))
    second = pd.concat(processor.handleInputRows(("red",), frames(4), None))
    assert first[["kind", "key", "count"]].values.tolist() == [[KIND_ANSWER, "red", 5]]
    assert second["count"].tolist() == [9]
    assert handle.ttls[STATE_VARIABLE] is None


def test_every_aggregate_merges_its_state_across_batches_and_from_a_seed():
    """Sum, min, max and mean over a field (nulls skipped), seeded as a savepoint seeds them."""
    answer = agg.checked([agg.Sum("amount", "total"), agg.Min("amount", "smallest"), agg.Max("amount", "largest"),
                          agg.Mean("amount", "mean")], CONFIG)
    processor, handle = AnswerProcessor(answer), FakeHandle()
    processor.init(handle)
    processor.handleInitialState(("red",), pd.DataFrame([{"total": 10, "smallest": 2, "largest": 8,
                                                          "mean_sum": 10.0, "mean_values": 2}]), None)
    amounts = pd.DataFrame({field_column("amount"): [1.0, None, 12.0]})  # a null comes as NaN
    out = pd.concat(processor.handleInputRows(("red",), iter([amounts]), None))
    assert out[["total", "smallest", "largest", "mean"]].values.tolist() == [[23, 1, 12, 23 / 4]]
    assert handle.states[STATE_VARIABLE].value == (23, 1, 12, 23.0, 4)


def test_a_key_without_values_has_a_null_sum_and_mean_and_a_count_of_its_rows():
    answer = agg.checked([agg.Count("n"), agg.Sum("amount", "total"), agg.Mean("amount", "mean")], CONFIG)
    processor = AnswerProcessor(answer)
    processor.init(FakeHandle())
    out = pd.concat(processor.handleInputRows(("red",), iter([pd.DataFrame({field_column("amount"): [None]})]),
                                              None))
    assert out["n"].tolist() == [1] and out["total"].isna().all() and out["mean"].isna().all()


def test_ttl_is_passed_in_milliseconds():
    handle = FakeHandle()
    AnswerProcessor(COUNT, ttl_seconds=60).init(handle)
    assert handle.ttls[STATE_VARIABLE] == 60_000


def test_dead_letters_pass_through_untouched():
    processor = AnswerProcessor(COUNT)
    processor.init(FakeHandle())
    dead = pd.DataFrame({"group_key": [None], "dead_letter_key": ["events/2/17"],
                         "dead_letter_value": ['{"reason": "not JSON: x"}']})
    out = pd.concat(processor.handleInputRows((None,), iter([dead]), None))
    row = out.iloc[0]
    assert (row["kind"], row["key"], row["dead_letter_value"]) == (
        KIND_DEAD_LETTER, "events/2/17", '{"reason": "not JSON: x"}')
