"""The streaming query, read top to bottom like the pipeline:

    Kafka source → parse → [the query: filter → count by key (state)] → Kafka sink (2PC)
                      └─ malformed records: counted per partition, read back ─→ dead-letter topic

The query is pipeline/query.py's, applied by pipeline/steps.py.

The source, the parse, the count (Spark's streaming aggregation) and the encoding of the output
records run in the JVM; Python runs the commit protocol on the driver (sink/).
A state TTL swaps the count for a Python operator (counting.py). Avro values are decoded and
encoded in the JVM too (formats/), with the schemas the registry gives when the query is built.
"""

from __future__ import annotations

import threading

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming import DataStreamWriter

from . import savepoints
from .config import JobConfig
from .formats import avro_input, avro_output, protobuf_input, protobuf_output
from .formats.registry import Registry
from .kafka.client import spark_source_options
from .pipeline import query, steps
from .pipeline.changes import Changes
from .pipeline.dead_letter_readback import dead_letter_reader
from .pipeline.decoding import decode
from .pipeline.output_records import answer_type, checked_route, encode
from .pipeline.parsing import event_schema
from .pipeline.wire_format import ids_of_the_pending_batch
from .savepoints import Origin
from .sink import AT_LEAST_ONCE, KafkaSink, for_commit, settings_for
from .spark.session import AVRO_PACKAGE, checkpoint_conf
from .spark.session import spark_session as new_session
from .storage import object_store
from .storage.files import resolve_location


def spark_session(config: JobConfig, app_name: str = "{{ cookiecutter.project_slug }}", write_class_archive: bool = False
                  ) -> SparkSession:
    """`write_class_archive`: the start is the job's own `run` (session.spark_session)."""
    json_logs = config.log_format == "json"
    packages: tuple[str, ...] = (AVRO_PACKAGE,) if config.uses_avro else ()
    jars: tuple[str, ...] = ()
    if config.uses_protobuf:  # the job's codec, and protobuf-java, which it is built on
        from .formats.protobuf_jar import PROTOBUF_JAVA, codec_jar

        packages, jars = (*packages, PROTOBUF_JAVA), (str(codec_jar()),)
    if not object_store.on_s3(config.checkpoint_location):
        conf = {**checkpoint_conf(config.checkpoint_location), **config.spark}
        return new_session(app_name, config.spark_master, config.shuffle_partitions, config.ui_port, conf,
                           packages=packages, json_logs=json_logs, write_class_archive=write_class_archive, jars=jars)
    object_store.use_in_this_process(config.s3)
    return new_session(app_name, config.spark_master, config.shuffle_partitions, config.ui_port,
                       conf={**object_store.spark_conf(config.s3), **config.spark}, json_logs=json_logs,
                       packages=(object_store.hadoop_aws_package(), *packages), write_class_archive=write_class_archive,
                       jars=jars)


def read_events(spark: SparkSession, config: JobConfig) -> DataFrame:
    """Spark's Kafka source: offsets in the checkpoint's offset log, only committed records; their
    headers where the query keeps them (query.KEEPS_HEADERS)."""
    return (
        spark.readStream.format("kafka")
        .options(**spark_source_options(config))
        .option("subscribe", config.input_topic)
        .option("startingOffsets", config.starting_offsets.strip())  # Spark's own form, checked by config
        .option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
        .option("includeHeaders", str(query.KEEPS_HEADERS).lower())
        .load()
    )


InputPlan = avro_input.AvroInput | protobuf_input.ProtobufInput


def parse(records: DataFrame, config: JobConfig, plan: InputPlan | None = None) -> DataFrame:
    return decode(records, event_schema(config, plan))


def registry(config: JobConfig, stopping: threading.Event | None = None) -> Registry | None:
    """The schema registry, for a job with Avro or Protobuf values (one per build of the query); None otherwise."""
    if not config.uses_registry:
        return None
    return Registry(config.schema_registry, config.schema_registry_tolerance_seconds, stopping)


def input_plan(spark: SparkSession, config: JobConfig, schemas: Registry | None) -> InputPlan | None:
    """For Avro or Protobuf input, what the registry says now: the subject's versions, and the ids
    of the batch a start runs again judged (formats/avro_input.py, protobuf_input.py); None for JSON."""
    if config.input_format == "json" or schemas is None:
        return None
    pending = ids_of_the_pending_batch(spark, config)
    if config.input_format == "protobuf":
        return protobuf_input.plan(config, schemas, pending)
    return avro_input.plan(config, schemas, pending)


def savepoint_seed(spark: SparkSession, config: JobConfig, origin: Origin | None) -> DataFrame | None:
    """A checkpoint started from a savepoint reads its keys' state once, in its first batch: Spark's
    aggregation as a one-shot file stream (the file source records in the checkpoint that it
    did), the TTL operator as its initial state (Spark applies it in batch 0 only). None for any
    other checkpoint."""
    location = savepoints.seed_location(config, origin)
    if location is None:
        return None
    reader = spark.read if config.state_ttl_seconds > 0 else spark.readStream
    return reader.schema(savepoints.state_schema(config)).parquet(location)


def write_changes(changes: Changes, config: JobConfig, origin: Origin | None,
                  stopping: threading.Event | None = None, plan: InputPlan | None = None,
                  schemas: Registry | None = None) -> tuple[DataStreamWriter, KafkaSink]:
    """The query's writer, and its sink (which says what it published for a batch); `plan`: the
    input's plan under a registry, which the dead letters' read-back decodes with too; `schemas`:
    the registry of this build (one is made for registry output without it)."""
    read_back = None if changes.dead_letters_inline else dead_letter_reader(config, event_schema(config, plan))
    output: avro_output.AvroOutput | protobuf_output.ProtobufOutput | None = None
    if config.output_format != "json":
        schemas = schemas or registry(config, stopping)
        assert schemas is not None  # output_format avro or protobuf: config.uses_registry
        prepare = protobuf_output.prepare if config.output_format == "protobuf" else avro_output.prepare
        output = prepare(config, answer_type(changes.frame), schemas)
    batch_id_number = output.batch_id_number if isinstance(output, protobuf_output.ProtobufOutput) else 0
    settings = settings_for(config, savepoints.first_batch_id(origin), batch_id_number)
    route = checked_route(changes.frame, lambda: query.route(config))
    records = encode(changes.frame, config.output_topic, config.dead_letter_topic, output, route, config.routes)
    if config.delivery_guarantee != AT_LEAST_ONCE:  # each record's hash and commit shard, in the query's own plan
        records = for_commit(records, settings.shards)
    sink = KafkaSink(settings, config.delivery_guarantee, read_back, stopping)
    writer = (
        records.writeStream.foreachBatch(sink)
        .outputMode(changes.output_mode)
        .option("checkpointLocation", resolve_location(config.checkpoint_location))
        .trigger(processingTime=f"{config.trigger_interval_seconds} seconds")
        .queryName(config.sink_id)
    )
    return writer, sink


def build_query(spark: SparkSession, config: JobConfig, origin: Origin | None,
                stopping: threading.Event | None = None) -> tuple[DataStreamWriter, KafkaSink]:
    """`config`: as the checkpoint runs it (savepoints.apply_origin with `origin`); `stopping`: the
    runner's gate, set when the job stops (sink/kafka_sink.py)."""
    schemas = registry(config, stopping)  # one client for the build: the input's plan and the output's schema
    plan = input_plan(spark, config, schemas)
    events = parse(read_events(spark, config), config, plan)
    changes = steps.changes(events, config, savepoint_seed(spark, config, origin))
    return write_changes(changes, config, origin, stopping, plan, schemas)


def answer_avro_schema(spark: SparkSession, config: JobConfig) -> dict:
    """The Avro schema the query's answers are published with (`output_schema` must be it)."""
    changes = steps.changes(parse(read_events(spark, config), config), config, None)
    answer: T.StructType = answer_type(changes.frame)
    return avro_output.schema_for(answer, avro_output.record_name(config))


def answer_protobuf_schema(spark: SparkSession, config: JobConfig) -> str:
    """The `.proto` file the query's answers are published with (`output_schema` must fit it)."""
    changes = steps.changes(parse(read_events(spark, config), config), config, None)
    answer: T.StructType = answer_type(changes.frame)
    return protobuf_output.schema_for(answer, protobuf_output.message_name(config))
