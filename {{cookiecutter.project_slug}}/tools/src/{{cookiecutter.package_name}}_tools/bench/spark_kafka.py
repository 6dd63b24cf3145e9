"""Contender 3: Spark's built-in Kafka source and sink (the JVM connector), the same parse,
filter and count (groupBy count, update mode, RocksDB state as this job), at-least-once.

With `--registry`, Avro in the registry's wire format as teams write it by hand for Spark: the
header cut off with `substring`, the body read by `from_avro` with the input subject's latest
schema (one writer schema, no dead letters); the counts written by `to_avro` behind a header of
the schema id registered for them. With `--value-format protobuf`, Protobuf the same way: the
header cut off, the body (its message indexes, then the message) read by the job's own JVM codec
with the input subject's latest schema (spark-protobuf's `from_protobuf` is what a team would
write, and is not served here: the same decoding as the job's, so the comparison is the sinks');
the counts written by the codec's encoder under a schema registered for them.

The connector comes the way a team gets it for Spark's own pipeline: `spark.jars.packages`,
resolved by Ivy (from its cache) at every start, in the version of the installed pyspark. The
job's own starts take the jars a first resolution found from the class path (resolved_jars.py)
and compile with C1 alone (session.QUICK_JIT): tricks of the job's, not the baseline's.

    python -m <package>_tools.bench.spark_kafka --bootstrap B --input T ...
"""

from __future__ import annotations

import argparse
import json
import sys

from .progress import record_progress

# The JVM's own default, given last so that it overrides the job's session.QUICK_JIT.
JVM_DEFAULT_JIT = "-XX:TieredStopAtLevel=4"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--input", "--output", "--checkpoint", "--key-field", "--filter",
                 "--progress-file"):
        parser.add_argument(name, required=True)
    parser.add_argument("--trigger-seconds", type=float, default=0.5)
    parser.add_argument("--max-per-trigger", type=int, default=50_000)
    parser.add_argument("--shuffle-partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--registry",
                        help="Avro or Protobuf in and out under this schema registry (the topics' subjects)")
    parser.add_argument("--value-format", choices=("avro", "protobuf"), default="avro",
                        help="with --registry: the values' format")
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from {{ cookiecutter.package_name }}.kafka.client import FETCH_MAX_WAIT_MS
    from {{ cookiecutter.package_name }}.spark.session import (
        AVRO_PACKAGE,
        KAFKA_CONNECTOR,
        checkpoint_conf,
        spark_session,
    )

    # The job's session for its checkpoint (job.spark_session): like for like, except for what a
    # team's own pipeline would not have: the connector is resolved at every start (a [spark]
    # table naming spark.jars.packages does that), and the driver JVM compiles as the JVM does by
    # default, C1 then C2 (the job's session.QUICK_JIT is the job's own).
    packages: tuple[str, ...] = ()
    jars: tuple[str, ...] = ()
    if args.registry and args.value_format == "protobuf":
        from {{ cookiecutter.package_name }}.formats.protobuf_jar import PROTOBUF_JAVA, codec_jar

        packages, jars = (PROTOBUF_JAVA,), (str(codec_jar()),)
    elif args.registry:
        packages = (AVRO_PACKAGE,)
    spark = spark_session("bench-spark-kafka", args.master, args.shuffle_partitions,
                          conf={**checkpoint_conf(args.checkpoint), "spark.jars.packages": KAFKA_CONNECTOR,
                                "spark.driver.extraJavaOptions": JVM_DEFAULT_JIT},
                          packages=packages, jars=jars)  # resolved with the connector
    progress = record_progress(spark, args.progress_file)
    key = args.key_field
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_per_trigger))
        .option("kafka.isolation.level", "read_committed")
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))  # the job's source setting: like for like
        .load()
    )
    by_hand: AvroByHand | ProtobufByHand | None = None
    if args.registry:
        by_hand = (ProtobufByHand(spark, args.registry, f"{args.input}-value", f"{args.output}-value")
                   if args.value_format == "protobuf" else
                   AvroByHand(args.registry, f"{args.input}-value", f"{args.output}-value"))
        events = source.select(by_hand.decoded(F.col("value")).alias("event")).select(
            F.col(f"event.`{key}`").alias(key))
    else:
        events = (source.select(F.from_json(F.col("value").cast("string"), f"`{key}` STRING").alias("event"))
                  .select(F.col(f"event.`{key}`").alias(key)))
    counts = events.where(F.col(key).isNotNull() & F.expr(args.filter)).groupBy(key).count()
    answer = F.struct(F.col(key).alias("key"), F.col("count").alias("count"))
    output = counts.select(
        F.col(key).alias("key"),
        (F.to_json(answer) if by_hand is None else by_hand.encoded(answer)).alias("value"),
    )
    query = (
        output.writeStream.format("kafka").outputMode("update")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .start()
    )
    try:
        return serve(query)
    finally:
        spark.stop()
        progress.close()


class AvroByHand:
    """The registry's wire format as a team's own Spark code handles it: the input subject's
    latest schema read once, the answers' schema registered once."""

    ANSWER = json.dumps({"type": "record", "name": "Count", "fields": [{"name": "key", "type": "string"},
                                                                       {"name": "count", "type": "long"}]})

    def __init__(self, registry: str, input_subject: str, output_subject: str) -> None:
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        client = SchemaRegistryClient({"url": registry})
        writer = client.get_latest_version(input_subject).schema.schema_str
        if writer is None:
            raise RuntimeError(f"subject {input_subject!r} has no schema")
        self.writer = writer
        self.answer_id = client.register_schema(output_subject, Schema(self.ANSWER, "AVRO"))

    def decoded(self, value):
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import from_avro

        return from_avro(F.substring(value, 6, 2**31 - 1), self.writer)  # the body: after the 5-byte header

    def encoded(self, answer):
        from pyspark.sql import functions as F
        from pyspark.sql.avro.functions import to_avro

        return F.concat(F.lit(b"\x00" + self.answer_id.to_bytes(4, "big")), to_avro(answer, self.ANSWER))


class ProtobufByHand:
    """The registry's wire format for Protobuf, the input subject's latest schema read once and
    decoded by the job's codec (its first message), the answers' schema registered once."""

    ANSWER = 'syntax = "proto3";\n\nmessage Count {\n  string key = 1;\n  int64 count = 2;\n}\n'

    def __init__(self, spark, registry: str, input_subject: str, output_subject: str) -> None:
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        from {{ cookiecutter.package_name }}.formats.protobuf_output import ProtobufOutput
        from {{ cookiecutter.package_name }}.formats.protobuf_schema import descriptor_set, message
        from {{ cookiecutter.package_name }}.pipeline.protobuf_parsing import register_decoder

        client = SchemaRegistryClient({"url": registry})
        latest = client.get_latest_version(input_subject)
        if latest.schema.schema_str is None or latest.schema_id is None:
            raise RuntimeError(f"subject {input_subject!r} has no schema")
        writer = descriptor_set(latest.schema.schema_str, "input_subject", input_subject)
        self.decoder = register_decoder(spark, latest.schema_id, writer, message(writer, "", "m", input_subject).name)
        answer = descriptor_set(self.ANSWER, "output_schema", "Count")
        counts = message(answer, "", "m", "Count")
        answer_id = client.register_schema(output_subject, Schema(self.ANSWER, "PROTOBUF"))
        self.output = ProtobufOutput(answer_id, answer, counts.name, counts.indexes, 0)

    def decoded(self, value):
        from pyspark.sql import functions as F

        return F.call_function(self.decoder, F.substring(value, 6, 2**31 - 1))["fields"]  # after the 5-byte header

    def encoded(self, answer):
        from {{ cookiecutter.package_name }}.formats.protobuf_output import encode

        return encode(answer, self.output)


def serve(query) -> int:
    """Run the query until SIGTERM/SIGINT, then stop it at a batch boundary; 1 if it failed."""
    from {{ cookiecutter.package_name }}.supervision.runner import StopRequested, stop_at_batch_boundary

    stop = StopRequested()
    stop.install()
    while not stop.event.is_set() and query.isActive:
        stop.event.wait(0.5)
    if query.isActive:
        stop_at_batch_boundary(query)
    elif query.exception() is not None:
        print(f"query failed: {query.exception()}", file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
