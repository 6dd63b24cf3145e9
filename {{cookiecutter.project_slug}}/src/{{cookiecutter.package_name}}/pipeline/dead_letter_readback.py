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

import json
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..config import JobConfig, java_client_options
from ..kafka.client import FETCH_MAX_WAIT_MS
from ..storage import checkpoint
from ..storage.files import resolve_location
from .dead_letters import DEAD_LETTER_KEY, DEAD_LETTER_VALUE, with_dead_letter_record
from .parsing import IS_EVENT, EventSchema, parse_records
from .unpushed_filter import where_in_place

EARLIEST = -2  # Spark's startingOffsets value for a partition's earliest offset


def dead_letter_reader(config: JobConfig, schema: EventSchema) -> Callable[[SparkSession, list[bytes], int], DataFrame]:
    """The sink's read-back function: (session, references, batch id) -> the dead letters' records,
    as output_records.encode makes them (the sink stamps them with the batch id as it produces)."""
    location = resolve_location(config.checkpoint_location)

    def read_back(spark: SparkSession, references: list[bytes], batch_id: int) -> DataFrame:
        partitions = sorted({int(reference) for reference in references})
        start, end = checkpoint.batch_range(location, batch_id, config.input_topic)
        topic = config.input_topic
        records = (
            spark.read.format("kafka")
            .options(**java_client_options(config.kafka))
            .option("kafka.bootstrap.servers", config.bootstrap_servers)
            .option("kafka.isolation.level", "read_committed")
            .option("assign", json.dumps({topic: partitions}))
            .option("startingOffsets", json.dumps({topic: {str(p): start.get(str(p), EARLIEST) for p in partitions}}))
            .option("endingOffsets", json.dumps({topic: {str(p): end[str(p)] for p in partitions}}))
            .option("failOnDataLoss", str(config.fail_on_data_loss).lower())
            .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))  # as the stream reads (kafka/client.py)
            .load()
        )
        return dead_letters(records, schema, config.dead_letter_topic)

    return read_back


def dead_letters(records: DataFrame, schema: EventSchema, dead_letter_topic: str) -> DataFrame:
    """Kafka records (the source's columns) to their dead letters' records."""
    # In place: pushed below the parse, the condition would parse every record again.
    dead = where_in_place(parse_records(records, schema), ~F.col(IS_EVENT))
    return with_dead_letter_record(dead).select(
        F.lit(dead_letter_topic).alias("topic"), F.col(DEAD_LETTER_KEY).cast("binary").alias("key"),
        F.col(DEAD_LETTER_VALUE).cast("binary").alias("value"))
