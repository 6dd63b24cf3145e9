"""A dead letter's Kafka record, built in the JVM from the parsed event: the key is the source
coordinates `topic/partition/offset`, the value a JSON object with the reason, the coordinates
and the raw value in base64; the batch id is added as its last field when the batch is written
(output_records.py). Built before the stateful operator, so only two strings (null for good
events) travel with each record through the shuffle."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .parsing import IS_EVENT, REASON

DEAD_LETTER_KEY = "dead_letter_key"
DEAD_LETTER_VALUE = "dead_letter_value"
# A dead letter keeps at most this much of the raw value, so it always fits in a Kafka record.
MAX_DEAD_LETTER_VALUE_BYTES = 65536


def with_dead_letter_record(events: DataFrame) -> DataFrame:
    """Add the dead-letter key and value (JSON without the batch id, which the sink adds)."""
    bad = ~F.col(IS_EVENT)
    return events.withColumn(DEAD_LETTER_KEY, F.when(bad, _key())).withColumn(DEAD_LETTER_VALUE, F.when(bad, _value()))


def _key() -> Column:
    return F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string"))


def _value() -> Column:
    raw = F.coalesce(F.col("raw_value"), F.lit(b"").cast("binary"))
    kept = F.substring(raw, 1, MAX_DEAD_LETTER_VALUE_BYTES)
    return F.to_json(F.struct(
        F.col(REASON).alias("reason"),
        F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        F.base64(kept).alias("value_base64"),
        (F.octet_length(raw) > MAX_DEAD_LETTER_VALUE_BYTES).alias("value_truncated"),
    ))
