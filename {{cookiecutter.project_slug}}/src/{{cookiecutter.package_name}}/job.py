"""The streaming query, read top to bottom like the pipeline:

    Kafka source → parse → filter → count by key (state) → Kafka sink (2PC)
                      └─ malformed records ───────────────→ dead-letter topic
"""

from __future__ import annotations

import os
import sys
from functools import partial

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from .config import JobConfig
from .counting import GROUP_KEY, OUTPUT_SCHEMA, CountProcessor
from .parsing import REASON, EventSchema, parse_batches
from .sink import SINK_NAME, KafkaSink
from .source import SOURCE_NAME, KafkaSource
from .storage import resolve_location

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spark_session(config: JobConfig, app_name: str = "{{ cookiecutter.project_slug }}") -> SparkSession:
    # Python workers must run the interpreter that has this package (in local mode, this one).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(config.spark_master)
        .appName(app_name)
        # Fixed by the checkpoint once the query has run; the default 200 costs seconds per batch.
        .config("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # the runner logs one line per batch instead
        # Report idle triggers every second, so the runner sees promptly when the input is drained.
        .config("spark.sql.streaming.noDataProgressEventInterval", "1000")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaSource)
    spark.dataSource.register(KafkaSink)
    return spark


def event_schema(config: JobConfig) -> EventSchema:
    return EventSchema(fields=dict(config.schema), key_field=config.key_field, max_record_bytes=config.max_record_bytes)


def read_events(spark: SparkSession, config: JobConfig) -> DataFrame:
    return (
        spark.readStream.format(SOURCE_NAME)
        .option("bootstrap.servers", config.bootstrap_servers)
        .option("topic", config.input_topic)
        .option("startingOffsets", config.starting_offsets)
        .option("maxRecordsPerTrigger", str(config.max_records_per_trigger))
        .option("failOnDataLoss", str(config.fail_on_data_loss).lower())
        .load()
    )


def parse(records: DataFrame, config: JobConfig) -> DataFrame:
    schema = event_schema(config)
    return records.mapInArrow(partial(parse_batches, schema=schema), schema.spark_ddl())


def keep_matching(events: DataFrame, config: JobConfig) -> DataFrame:
    """Apply the filter to good events; dead letters always pass, to reach their topic."""
    return events.where(F.col(REASON).isNotNull() | F.expr(config.filter))


def count_by_key(events: DataFrame, config: JobConfig) -> DataFrame:
    keyed = events.withColumn(GROUP_KEY, F.when(F.col(REASON).isNull(), F.col(config.key_field).cast("string")))
    return keyed.groupBy(GROUP_KEY).transformWithStateInPandas(
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
