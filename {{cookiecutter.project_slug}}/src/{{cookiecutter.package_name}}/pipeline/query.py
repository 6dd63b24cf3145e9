"""The job's query: from parsed events (parsing.py) to the changes the sink publishes. Filter,
then count by key. Three things here describe it, and change together:
- `changes`: the query itself, in Spark;
- `OUTPUT`: what its published records mean, as the tests' differential oracle compares them
  (tools' differential.py): "upsert", one record per key and batch, a key's latest record its
  answer (a count); or "append", every record an answer of its own;
- `model`: the same query in plain Python, one event at a time, which the tests hold the job's
  output to, batch by batch (tools' verify.py).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
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


Answer = dict[str, object]  # an output record's value, without the batch id the sink adds


def model(events: Iterable[Mapping[str, object]], config: JobConfig) -> Iterator[tuple[str, Answer]]:
    """The query in plain Python: for each event the filter keeps (the tests evaluate the filter
    with Spark SQL, apart from the job), in input order, the key whose answer it changes and the
    new answer. What a key's answer is after a batch must not depend on the order of the batch's
    events (a batch reads its partitions in parallel)."""
    counts: Counter[str] = Counter()
    for event in events:
        key = as_key(event[config.key_field])
        counts[key] += 1
        yield key, {"key": key, "count": counts[key]}


def as_key(value: object) -> str:
    """A field as the output key holds it: Spark's cast to string."""
    return json.dumps(value) if isinstance(value, bool) else str(value)
