"""A key's answer with a state TTL: a transformWithStateInPandas processor that keeps the answer's
state columns (aggregates.py) per key in the RocksDB state store, forgets a key idle for
`state_ttl_seconds`, and emits only the keys whose answer changed in the batch. Chosen by
counting.py when a TTL is set.

Dead letters travel through the same operator (grouped under the null key) so that they
reach the sink in the same batch, and so in the same Kafka transaction, as the answers. Unlike
Spark's aggregation (counting.py), this operator is grouped by the key alone: with a second
grouping column that is null for every good event, transformWithStateInPandas called the
processor once per row, and each key's answer was published once per event."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues

from .aggregates import Answer, StateColumn
from .changes import DEAD_LETTER_GROUP, GROUP_KEY, KIND_ANSWER, KIND_DEAD_LETTER
from .dead_letters import DEAD_LETTER_KEY, DEAD_LETTER_VALUE, with_dead_letter_record
from .parsing import IS_EVENT

# The state variable's name: its checkpoints record it, and one by another name would not resume.
STATE_VARIABLE = "count"
_PANDAS_TYPES = {"BIGINT": "Int64", "DOUBLE": "Float64", "BOOLEAN": "boolean", "STRING": "object"}


def changes_schema(answer: Answer) -> str:
    """The operator's changes: kind, key, the answer's published fields, the dead letter's value."""
    fields = ", ".join(f"`{a.name}` {answer.published_type(a)}" for a in answer.aggregates)
    return f"kind STRING, key STRING, {fields}, {DEAD_LETTER_VALUE} STRING"


def field_column(field: str) -> str:
    """An event field's column among the operator's input (keyed_records), apart from its own."""
    return f"field_{field}"


def keyed_records(events: DataFrame, key_field: str, answer: Answer) -> DataFrame:
    """The operator's input: the key of a good event and the fields its answer reads, or a dead
    letter's group and record."""
    good = F.col(IS_EVENT)
    fields = dict.fromkeys(column.field for column in answer.state if column.field is not None)
    return with_dead_letter_record(events).select(
        F.when(good, F.col(key_field).cast("string")).alias(GROUP_KEY),
        F.when(~good, F.col("partition")).alias(DEAD_LETTER_GROUP), DEAD_LETTER_KEY, DEAD_LETTER_VALUE,
        *(F.col(f"`{field}`").alias(field_column(field)) for field in fields))


def aggregate_with_ttl(keyed: DataFrame, answer: Answer, ttl_seconds: int, seed: DataFrame | None = None
                       ) -> DataFrame:
    """Changes (changes_schema) from records (keyed_records); `seed`: a savepoint's state
    (key and the answer's state columns), the initial state Spark hands the first batch."""
    initial = None if seed is None else seed.select(
        F.col("key").alias(GROUP_KEY), *(F.col(f"`{column.name}`") for column in answer.state)).groupBy(GROUP_KEY)
    return keyed.groupBy(GROUP_KEY).transformWithStateInPandas(
        statefulProcessor=AnswerProcessor(answer, ttl_seconds),
        outputStructType=changes_schema(answer),
        outputMode="Append",
        timeMode="ProcessingTime",
        initialState=initial,
    )


class AnswerProcessor(StatefulProcessor):
    def __init__(self, answer: Answer, ttl_seconds: int = 0) -> None:
        self.answer = answer
        self.ttl_ms = ttl_seconds * 1000 if ttl_seconds > 0 else None

    def init(self, handle: StatefulProcessorHandle) -> None:
        # With a TTL, a key idle for that long starts again from nothing.
        self.state = handle.getValueState(STATE_VARIABLE, self.answer.state_ddl(), self.ttl_ms)

    def handleInitialState(self, key: tuple, initialState: pd.DataFrame, timerValues: TimerValues) -> None:
        # A savepoint's state (one row per key), not published: only events change what is.
        # Its TTL starts again now.
        row = initialState.iloc[0]
        self.state.update(tuple(_python(row[column.name], column.type) for column in self.answer.state))

    def handleInputRows(
        self, key: tuple, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        (group_key,) = key
        if group_key is None:
            yield from dead_letter_frames(rows, self.answer)
            return
        stored = self.state.get() if self.state.exists() else None
        values = merged(self.answer.state, stored, pd.concat(list(rows), ignore_index=True))
        self.state.update(values)
        yield answer_frame(group_key, self.answer, values)

    def close(self) -> None:
        pass


def merged(columns: Sequence[StateColumn], stored: tuple | None, batch: pd.DataFrame) -> tuple:
    """A key's state values after `batch` (its events' rows), from `stored` (None: a new key)."""
    values = []
    for position, column in enumerate(columns):
        if column.merge == "rows":
            partial: object = len(batch)
        else:
            present = batch[field_column(column.field or "")].dropna()
            if column.merge == "values":
                partial = len(present)
            elif present.empty:
                partial = None
            else:
                partial = {"sum": present.sum, "min": present.min, "max": present.max}[column.merge]()
        before = None if stored is None else stored[position]
        values.append(_merge(column, _python(before, column.type), _python(partial, column.type)))
    return tuple(values)


def _merge(column: StateColumn, before: Any, partial: Any) -> Any:
    """Two values of a state column as one (aggregates.Merge); None is no value yet."""
    if before is None or partial is None:
        return partial if before is None else before
    if column.merge == "min":
        return min(before, partial)
    if column.merge == "max":
        return max(before, partial)
    return before + partial


def _python(value: object, spark_type: str) -> object:
    """A value as its Spark type's Python value (pandas hands numbers as numpy's, nulls as NaN)."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return {"BIGINT": int, "DOUBLE": float, "BOOLEAN": bool, "STRING": str}[spark_type](value)


def answer_frame(key: str, answer: Answer, values: tuple) -> pd.DataFrame:
    published = answer.published({column.name: value for column, value in zip(answer.state, values, strict=True)})
    return pd.DataFrame({
        "kind": [KIND_ANSWER], "key": [key],
        **{a.name: pd.array([published[a.name]], dtype=_PANDAS_TYPES[answer.published_type(a)])
           for a in answer.aggregates},
        DEAD_LETTER_VALUE: [None]})


def dead_letter_frames(rows: Iterator[pd.DataFrame], answer: Answer) -> Iterator[pd.DataFrame]:
    for frame in rows:
        yield pd.DataFrame({
            "kind": KIND_DEAD_LETTER,
            "key": frame[DEAD_LETTER_KEY].to_numpy(),
            **{a.name: pd.array([None] * len(frame), dtype=_PANDAS_TYPES[answer.published_type(a)])
               for a in answer.aggregates},
            DEAD_LETTER_VALUE: frame[DEAD_LETTER_VALUE].to_numpy(),
        })
