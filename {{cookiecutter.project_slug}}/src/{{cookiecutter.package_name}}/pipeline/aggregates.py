"""What a key's answer is made of (query.answer): aggregates whose state merges, so that Spark's
aggregation, the state TTL's operator (ttl_counting.py), a savepoint and its restore keep and move
any answer built from them.

    Count("count")              how many kept events the key had
    Sum("amount", "total")      the sum of a numeric field (null until a value is not)
    Min("amount", "smallest")   the least value of a field
    Max("amount", "largest")    the greatest
    Mean("amount", "mean")      the sum over the number of values (kept as both)

Each is kept as state columns, and each state column merges one way (a sum, a least, a greatest):
two partial states of a key combine into the state of both, which is what a savepoint's seed, the
TTL operator's batches and Spark's partial aggregation before the shuffle all do. Nulls are
skipped, as Spark's own aggregates skip them (a dead letter's fields are null). Nothing here
imports Spark: the start checks an answer before Spark runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ..config import JobConfig
from ..failures import AnswerNotMergeable
from .changes import checked_answer_names
from .parsing import SPARK_TYPES

# How a state column is made from a key's events, and so how two of its values merge: "rows" and
# "values" count (every event, the events with the field), summed; the others as named.
Merge = Literal["rows", "values", "sum", "min", "max"]
NUMERIC = ("int", "float")


@dataclass(frozen=True)
class StateColumn:
    name: str
    type: str  # Spark SQL
    merge: Merge
    field: str | None = None  # the event field it reads; None for a count of rows


@dataclass(frozen=True)
class Count:
    """How many kept events the key had."""

    name: str = "count"

    def state(self, schema: Mapping[str, str]) -> tuple[StateColumn, ...]:
        return (StateColumn(self.name, "BIGINT", "rows"),)

    def published(self, state: Mapping[str, object]) -> object:
        return state[self.name]


@dataclass(frozen=True)
class _OfField:
    """An aggregate of one field, kept as one state column of the field's type."""

    field: str
    name: str
    merge: ClassVar[Merge]

    def state(self, schema: Mapping[str, str]) -> tuple[StateColumn, ...]:
        return (StateColumn(self.name, SPARK_TYPES[schema[self.field]], self.merge, self.field),)

    def published(self, state: Mapping[str, object]) -> object:
        return state[self.name]


@dataclass(frozen=True)
class Sum(_OfField):
    """The sum of a numeric field over the key's kept events."""

    merge: ClassVar[Merge] = "sum"


@dataclass(frozen=True)
class Min(_OfField):
    """The least value of a field over the key's kept events."""

    merge: ClassVar[Merge] = "min"


@dataclass(frozen=True)
class Max(_OfField):
    """The greatest value of a field over the key's kept events."""

    merge: ClassVar[Merge] = "max"


@dataclass(frozen=True)
class Mean:
    """The mean of a numeric field: its sum over its number of values (null before the first)."""

    field: str
    name: str

    @property
    def sum_column(self) -> str:
        return f"{self.name}_sum"

    @property
    def values_column(self) -> str:
        return f"{self.name}_values"

    def state(self, schema: Mapping[str, str]) -> tuple[StateColumn, ...]:
        return (StateColumn(self.sum_column, "DOUBLE", "sum", self.field),
                StateColumn(self.values_column, "BIGINT", "values", self.field))

    def published(self, state: Mapping[str, Any]) -> object:
        total, values = state[self.sum_column], state[self.values_column]
        return None if total is None or not values else float(total) / int(values)


Aggregate = Count | Sum | Min | Max | Mean
AGGREGATES = (Count, Sum, Min, Max, Mean)


@dataclass(frozen=True)
class Answer:
    """A query's answer, checked (`checked`): its aggregates, and the state columns that keep them."""

    aggregates: tuple[Aggregate, ...]
    state: tuple[StateColumn, ...]

    @property
    def names(self) -> list[str]:
        return [aggregate.name for aggregate in self.aggregates]

    def state_ddl(self) -> str:
        """The state's columns, as a Spark schema string."""
        return ", ".join(f"`{column.name}` {column.type}" for column in self.state)

    def published_type(self, aggregate: Aggregate) -> str:
        if isinstance(aggregate, Mean):
            return "DOUBLE"
        return next(column.type for column in self.state if column.name == aggregate.name)

    def published(self, state: Mapping[str, object]) -> dict[str, object]:
        """A key's published fields from its state values."""
        return {aggregate.name: aggregate.published(state) for aggregate in self.aggregates}


def checked(aggregates: Sequence[object], config: JobConfig) -> Answer:
    """query.answer's aggregates, refused in one line naming the one that cannot be kept: not one
    of AGGREGATES (its state would not merge: a savepoint, a state TTL or Spark's partial
    aggregation would lose it), a field that `[schema]` lacks or that is not a number where a
    number is summed, a name the sink's changes use or another aggregate's state uses."""
    if not aggregates:
        raise AnswerNotMergeable("pipeline/query.py: answer() returns no aggregate; a key's answer needs one")
    kinds = ", ".join(kind.__name__ for kind in AGGREGATES)
    chosen: list[Aggregate] = []
    for aggregate in aggregates:
        if not isinstance(aggregate, AGGREGATES):
            raise AnswerNotMergeable(
                f"pipeline/query.py: answer() returns {aggregate!r}, whose state does not merge: build the answer "
                f"from {kinds} (pipeline/aggregates.py), which savepoints, a state TTL and restores keep")
        field = None if isinstance(aggregate, Count) else aggregate.field
        if field is not None and field not in config.schema:
            raise AnswerNotMergeable(f"pipeline/query.py: {aggregate!r} reads {field!r}, which [schema] does not "
                                     f"declare (it declares {', '.join(sorted(config.schema))})")
        if isinstance(aggregate, Sum | Mean) and config.schema[aggregate.field] not in NUMERIC:
            raise AnswerNotMergeable(f"pipeline/query.py: {aggregate!r} needs a number, and [schema] declares "
                                     f"{aggregate.field!r} a {config.schema[aggregate.field]}")
        chosen.append(aggregate)
    checked_answer_names([aggregate.name for aggregate in chosen])
    state: list[StateColumn] = []
    for aggregate in chosen:
        for column in aggregate.state(config.schema):
            taken = {c.name.lower() for c in state} | {a.name.lower() for a in chosen if a is not aggregate}
            if column.name.lower() in taken:
                raise AnswerNotMergeable(f"pipeline/query.py: {aggregate!r} keeps its state as {column.name!r}, a "
                                         "name another aggregate of the answer uses: name them apart")
            state.append(column)
    return Answer(tuple(chosen), tuple(state))
