"""The stateless query's step: each kept event becomes one output record and each malformed
record one dead letter, in one pass over the batch. Nothing is kept between batches: no state
store, no shuffle, Spark's append mode. A re-run of a batch reads the same offsets and so
computes the same records, which is all the sink's protocol needs of it. Each record, a dead
letter too, carries the headers of the input record it came from (query.KEEPS_HEADERS)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .changes import KIND_ANSWER, KIND_DEAD_LETTER, Changes, checked_answer_names
from .dead_letters import DEAD_LETTER_KEY, DEAD_LETTER_VALUE, with_dead_letter_record
from .parsing import HEADERS, IS_EVENT


def project_changes(events: DataFrame, key_field: str, fields: list[Column]) -> Changes:
    """`fields`: the output value's named columns (query.project), read from a kept event; a
    dead letter's row carries its key and value instead."""
    good = F.col(IS_EVENT)
    frame = with_dead_letter_record(events).select(
        F.when(good, F.lit(KIND_ANSWER)).otherwise(F.lit(KIND_DEAD_LETTER)).alias("kind"),
        F.when(good, F.col(key_field).cast("string")).otherwise(F.col(DEAD_LETTER_KEY)).alias("key"),
        *fields, DEAD_LETTER_VALUE, *([HEADERS] if HEADERS in events.columns else []))
    checked_answer_names(frame.columns[2:2 + len(fields)])  # after kind and key
    return Changes(frame, "append", dead_letters_inline=True)
