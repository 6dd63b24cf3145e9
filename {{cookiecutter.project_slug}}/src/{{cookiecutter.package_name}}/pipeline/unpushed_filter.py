"""Filters that Spark's optimizer leaves where they are written.

Spark pushes a filter down through every projection below it, replacing each column by the
expression that computes it (PushDownPredicates has no notion of cost). Above the parse, the
job's filter (`NOT is_event OR color != 'orange'`) would become a condition
on the raw Kafka value that parses the JSON itself, and the projections above it would parse
it again: two to three parses per record instead of one. A generator is not pushed down, so a
filter written as one
(one row or none per record) runs on the columns already computed."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def rows_where(condition: Column, *columns: Column) -> Column:
    """A generator of the row `columns` where `condition` holds, none elsewhere (use with `inline`)."""
    return F.when(condition, F.array(F.struct(*columns)))


def where_in_place(frame: DataFrame, condition: Column) -> DataFrame:
    """`frame.where(condition)`, evaluated on `frame`'s columns rather than pushed below them."""
    return frame.select(F.inline(rows_where(condition, *(F.col(f"`{name}`") for name in frame.columns))))
