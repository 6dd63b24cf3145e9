"""The job's output as Kafka records, built in the JVM once the batch id is known: a count
becomes `{"key": ..., "count": ..., "batch_id": N}` on the output topic, keyed by its key; a
dead letter gets the batch id as the last field of its JSON value (dead_letters.py) and goes to
the dead-letter topic, keyed by its source coordinates. The sink only stages and produces bytes."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .counting import KIND_COUNT
from .dead_letters import DEAD_LETTER_VALUE


def encode(changes: DataFrame, batch_id: int, output_topic: str, dead_letter_topic: str) -> DataFrame:
    """Changes (counting.CHANGES_SCHEMA) to `topic STRING, key BINARY, value BINARY`."""
    is_count = F.col("kind") == KIND_COUNT
    batch = F.lit(batch_id).cast("bigint")
    count_value = F.to_json(F.struct(F.col("key"), F.col("count"), batch.alias("batch_id")))
    dead_letter_value = F.regexp_replace(
        F.col(DEAD_LETTER_VALUE), r"\}$", F.concat(F.lit(',"batch_id":'), batch.cast("string"), F.lit("}")))
    return (
        # The dead letters' own count row (counting.py) has no key and is not output.
        changes.where(~is_count | F.col("key").isNotNull())
        .select(
            F.when(is_count, F.lit(output_topic)).otherwise(F.lit(dead_letter_topic)).alias("topic"),
            F.col("key").cast("binary").alias("key"),
            F.when(is_count, count_value).otherwise(dead_letter_value).cast("binary").alias("value"),
        )
    )
