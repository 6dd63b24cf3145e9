"""A batch's dead letters, read back from its input when the count says it has some.

Spark's aggregation counts dead letters per input partition, so only the keys of a batch's
good events cross the shuffle (each task's distinct keys, aggregated partially); a change row
for partition P means P had dead letters in this batch (counting.py). The sink then reads the
batch's offset range of those partitions again (from the checkpoint's `offsets/N-1` to
`offsets/N`, read_committed, as the streaming source read it) and parses it with the same
expressions, which gives the same dead letters on every run of the batch. They join the
batch's records before phase 2: same Kafka transaction as the counts.

A batch without dead letters reads nothing again; one with dead letters in P reads P's range
twice (docs/guarantee.md gives the cost, with the command that measures it).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..config import JobConfig
from ..storage import checkpoint
from ..storage.files import resolve_location
from .dead_letters import DEAD_LETTER_KEY, DEAD_LETTER_VALUE, with_dead_letter_record
from .decoding import decode
from .input_range import read_input_range
from .parsing import IS_EVENT, EventSchema
from .unpushed_filter import where_in_place


def dead_letter_reader(config: JobConfig, schema: EventSchema) -> Callable[[SparkSession, list[bytes], int], DataFrame]:
    """The sink's read-back function: (session, the read-back requests' keys, batch id) -> the dead letters' records,
    as output_records.encode makes them (the sink stamps them with the batch id as it produces)."""
    location = resolve_location(config.checkpoint_location)

    def read_back(spark: SparkSession, read_back_keys: list[bytes], batch_id: int) -> DataFrame:
        partitions = sorted({int(key) for key in read_back_keys})
        start, end = checkpoint.batch_range(location, batch_id, config.input_topic)
        return dead_letters(read_input_range(spark, config, start, end, partitions), schema, config.dead_letter_topic)

    return read_back


def dead_letters(records: DataFrame, schema: EventSchema, dead_letter_topic: str) -> DataFrame:
    """Kafka records (the source's columns) to their dead letters' records."""
    # In place: pushed below the parse, the condition would parse every record again.
    dead = where_in_place(decode(records, schema), ~F.col(IS_EVENT))
    return with_dead_letter_record(dead).select(
        F.lit(dead_letter_topic).alias("topic"), F.col(DEAD_LETTER_KEY).cast("binary").alias("key"),
        F.col(DEAD_LETTER_VALUE).cast("binary").alias("value"))
