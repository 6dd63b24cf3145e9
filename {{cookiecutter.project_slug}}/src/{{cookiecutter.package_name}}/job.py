"""The streaming query, read top to bottom like the pipeline:

    Kafka source → parse → filter → count by key (state) → Kafka sink (2PC)
                      └─ malformed records ───────────────→ dead-letter topic

The source and the parse run in the JVM (Spark's Kafka connector, variant JSON parsing); only
the count and the sink run Python.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from .config import JobConfig
from .counting import GROUP_KEY, INPUT_COLUMNS, OUTPUT_SCHEMA, CountProcessor
from .dead_letters import with_dead_letter_record
from .kafka_client import java_client_options
from .parsing import REASON, EventSchema, parse_records
from .session import spark_session as new_session
from .sink import SINK_NAME, KafkaSink
from .storage import resolve_location


def spark_session(config: JobConfig, app_name: str = "{{ cookiecutter.project_slug }}") -> SparkSession:
    spark = new_session(app_name, config.spark_master, config.shuffle_partitions)
    spark.dataSource.register(KafkaSink)
    return spark


def event_schema(config: JobConfig) -> EventSchema:
    return EventSchema(fields=dict(config.schema), key_field=config.key_field, max_record_bytes=config.max_record_bytes)


def read_events(spark: SparkSession, config: JobConfig) -> DataFrame:
    """Spark's Kafka source: offsets in the checkpoint's offset log, only committed records."""
    return (
        spark.readStream.format("kafka")
        .options(**java_client_options(config.kafka))
        .option("kafka.bootstrap.servers", config.bootstrap_servers)
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", config.input_topic)
        .option("startingOffsets", config.starting_offsets.strip())  # Spark's own form, checked by config
        .option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
        .option("failOnDataLoss", str(config.fail_on_data_loss).lower())
        .load()
    )


def parse(records: DataFrame, config: JobConfig) -> DataFrame:
    return parse_records(records, event_schema(config))


def keep_matching(events: DataFrame, config: JobConfig) -> DataFrame:
    """Apply the filter to good events; dead letters always pass, to reach their topic."""
    return events.where(F.col(REASON).isNotNull() | F.expr(config.filter))


def count_by_key(events: DataFrame, config: JobConfig) -> DataFrame:
    keyed = with_dead_letter_record(events).withColumn(
        GROUP_KEY, F.when(F.col(REASON).isNull(), F.col(config.key_field).cast("string")))
    # Only what the processor reads crosses to Python: the key, or a dead letter's record.
    return keyed.select(*INPUT_COLUMNS).groupBy(GROUP_KEY).transformWithStateInPandas(
        statefulProcessor=CountProcessor(config.state_ttl_seconds),
        outputStructType=OUTPUT_SCHEMA,
        outputMode="Append",
        timeMode="ProcessingTime" if config.state_ttl_seconds > 0 else "None",
    )


def write_counts(counts: DataFrame, config: JobConfig) -> DataStreamWriter:
    return (
        counts.writeStream.format(SINK_NAME)
        .outputMode("append")
        .option("checkpointLocation", resolve_location(config.checkpoint_location))
        .option("delivery.guarantee", config.delivery_guarantee)
        .option("bootstrap.servers", config.bootstrap_servers)
        .option("kafka.client.config", json.dumps(config.kafka))
        .option("output.topic", config.output_topic)
        .option("dead.letter.topic", config.dead_letter_topic)
        .option("marker.topic", config.marker_topic)
        .option("sink.id", config.sink_id)
        .option("transactional.id.prefix", config.transactional_id_prefix)
        .option("commit.shards", str(config.commit_shards))
        .option("commit.timeout.seconds", str(config.commit_timeout_seconds))
        .option("staging.retention.batches", str(config.staging_retention_batches))
        .trigger(processingTime=f"{config.trigger_interval_seconds} seconds")
        .queryName(config.sink_id)
    )


def build_query(spark: SparkSession, config: JobConfig) -> DataStreamWriter:
    events = parse(read_events(spark, config), config)
    return write_counts(count_by_key(keep_matching(events, config), config), config)
