"""Contenders eos and alos: this job, run exactly as `<package> run --set ...` runs it
(cli._run), plus a streaming query listener that appends each batch's progress JSON to a file,
so the benchmark can tell where a batch's time goes (durationMs: latestOffset, addBatch...).

With `--built-in-sink`, contender spark_kafka_job: the job's own query (source, parse with its
dead letters, pipeline/query.py's query, output records) written by Spark's built-in Kafka sink
(at-least-once) instead of this job's sink: what the sink alone costs.

    python -m <package>_tools.bench.jobproc --progress-file F [--built-in-sink] --set option=value ...
"""

from __future__ import annotations

import argparse
import sys

from .progress import record_progress


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--progress-file", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE")
    parser.add_argument("--built-in-sink", action="store_true")
    args = parser.parse_args(argv)

    import logging

    from {{ cookiecutter.package_name }}.config import load_config
    from {{ cookiecutter.package_name }}.job import build_query, spark_session
    from {{ cookiecutter.package_name }}.observability.logs import quiet_libraries
    from {{ cookiecutter.package_name }}.spark.session import stop as stop_session
    from {{ cookiecutter.package_name }}.startup.preflight import check_before_spark, sink_checks_meanwhile
    from {{ cookiecutter.package_name }}.startup.startup import StartupTimes
    from {{ cookiecutter.package_name }}.supervision.runner import StopRequested, run

    from .spark_kafka import serve

    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(message)s")
    quiet_libraries()  # as cli.run_command: py4j at WARNING, its traceback of a failed batch at DEBUG
    startup = StartupTimes()  # the steps cli._run times, in its order
    config = load_config(None, dict(item.split("=", 1) for item in args.set))
    check_before_spark(config)
    sink_checks = sink_checks_meanwhile(config)
    stop = StopRequested()
    stop.install()
    startup.step("checks")
    spark = spark_session(config, write_class_archive=True)  # as `run` starts it
    startup.step("spark session")
    progress = record_progress(spark, args.progress_file)
    try:
        if args.built_in_sink:
            return serve(built_in_sink(spark, config).option("checkpointLocation", config.checkpoint_location)
                         .trigger(processingTime=f"{config.trigger_interval_seconds} seconds").start())
        run(spark, config, build_query, stop, startup=startup, sink_checks=sink_checks)
    finally:
        stop_session(spark)
        progress.close()
    return 0


def built_in_sink(spark, config):
    """The job's query up to its Kafka records, then Spark's Kafka sink. Spark's sink cannot read
    dead letters back: their references (records without a topic) are dropped, so this
    contender publishes the answers only (the benchmark's input has no malformed records)."""
    from {{ cookiecutter.package_name }} import job
    from {{ cookiecutter.package_name }}.pipeline import steps
    from {{ cookiecutter.package_name }}.pipeline.output_records import encode

    changes = steps.changes(job.parse(job.read_events(spark, config), config), config)
    records = encode(changes.frame, config.output_topic, config.dead_letter_topic).where("topic IS NOT NULL")
    return (records.writeStream.format("kafka").outputMode(changes.output_mode)
            .option("kafka.bootstrap.servers", config.bootstrap_servers))


if __name__ == "__main__":
    sys.exit(main())
