"""The job's query: from parsed events (parsing.py) to the changes the sink publishes. Filter,
then count by key.

`OUTPUT` says what the published records mean, which is what the differential oracle of the tests
compares (tools' differential.py):
- "upsert": one record per key and batch, and a key's latest record is its answer (a count);
- "append": every record is an answer of its own (the multiset of records is the output).
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..config import JobConfig
from .counting import Changes, columns_read, count_changes
from .parsing import IS_EVENT
from .unpushed_filter import where_in_place

OutputKind = Literal["upsert", "append"]
OUTPUT: OutputKind = "upsert"


def keep_matching(events: DataFrame, config: JobConfig) -> DataFrame:
    """Apply the filter to events; dead letters always pass, to reach their topic. In place:
    pushed down, the filter would parse every record again (unpushed_filter.py). Only the columns
    the count reads cross that barrier (Spark cannot prune what a generator carries)."""
    carried = events.select(*(f"`{name}`" for name in columns_read(events.columns, config.state_ttl_seconds)))
    return where_in_place(carried, ~F.col(IS_EVENT) | F.expr(config.filter))


def count_by_key(events: DataFrame, config: JobConfig, seed: DataFrame | None = None) -> Changes:
    """`seed`: a savepoint's counts, or None (job.savepoint_seed)."""
    return count_changes(events, config.key_field, config.state_ttl_seconds, seed)


def changes(events: DataFrame, config: JobConfig, seed: DataFrame | None = None) -> Changes:
    """The whole query: parsed events in, changes out."""
    return count_by_key(keep_matching(events, config), config, seed)
