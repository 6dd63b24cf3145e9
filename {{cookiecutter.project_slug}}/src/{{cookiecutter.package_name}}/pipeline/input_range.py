"""A range of the input topic read again as a batch: what the stream read for a batch (its
offsets in the checkpoint), read_committed with the job's client settings. The dead letters'
read-back reads a batch's partitions that had some (dead_letter_readback.py); an Avro input's
rebuild reads the batch it runs again for its schema ids (avro_parsing.py)."""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession

from ..config import JobConfig
from ..kafka.client import spark_source_options

EARLIEST = -2  # Spark's startingOffsets value for a partition's earliest offset


def read_input_range(spark: SparkSession, config: JobConfig, start: dict[str, int], end: dict[str, int],
                     partitions: list[int] | None = None) -> DataFrame:
    """The input topic's records from `start` to `end` ({"<partition>": offset}, a partition
    absent from `start` from its earliest), of `partitions` (None: every partition in `end`),
    read as the stream reads them: read_committed, the same client settings."""
    topic = config.input_topic
    partitions = sorted(int(p) for p in end) if partitions is None else partitions
    return (
        spark.read.format("kafka")
        .options(**spark_source_options(config))  # as the stream reads
        .option("assign", json.dumps({topic: partitions}))
        .option("startingOffsets", json.dumps({topic: {str(p): start.get(str(p), EARLIEST) for p in partitions}}))
        .option("endingOffsets", json.dumps({topic: {str(p): end[str(p)] for p in partitions}}))
        .load()
    )
