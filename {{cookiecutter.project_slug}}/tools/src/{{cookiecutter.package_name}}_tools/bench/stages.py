"""Where a batch's time goes, stage by stage: the job's own query cut after each stage, each run
on the same backlog with `trigger(availableNow)`, Spark's triggerExecution per batch printed
and written as JSON. The first batch of a query pays its start-up; the steady figure is the
median of the others, and the summary the median of that over the rounds after the first.

    python -m <package>_tools.bench.stages --events 400000 --max-per-batch 50000 [--rounds 3] [--out stages.json]

Variants: parse (source + JVM parse + filter, noop sink), count (+ the count: Spark's
aggregation, dead letters counted per input partition, noop sink), full (+ the exactly-once sink: the job as it
runs), spark_kafka_job (the job's query with Spark's own Kafka sink, at-least-once: the
benchmark's contender of that name), spark_kafka (the benchmark's minimal built-in contender on
the same source: `from_json` of the key, `groupBy().count()`, Spark's own Kafka sink). Uses
KAFKA_BOOTSTRAP_SERVERS when set, else starts a broker (kafka_local.provide_kafka).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

VARIANTS = ("parse", "count", "full", "spark_kafka_job", "spark_kafka")
# Spark's per-batch phases (StreamingQueryProgress.durationMs): where a batch's time goes besides the job.
PHASES = ("queryPlanning", "addBatch", "walCommit", "commitOffsets", "latestOffset")


def measure(bootstrap: str, topic: str, variant: str, max_per_batch: int, workdir: Path) -> list[dict]:
    from {{ cookiecutter.package_name }} import job
    from {{ cookiecutter.package_name }}.config import load_config
    from {{ cookiecutter.package_name }}.pipeline import steps

    suffix = uuid.uuid4().hex[:8]
    config = load_config(None, {
        "bootstrap_servers": bootstrap, "input_topic": topic, "output_topic": f"{topic}-out",
        "dead_letter_topic": f"{topic}-dead", "marker_topic": f"{topic}-markers", "sink_id": f"stages-{suffix}",
        "checkpoint_location": str(workdir / f"checkpoint-{variant}-{suffix}"), "shuffle_partitions": "2",
        "ui_port": "0", "metrics_port": "0",
        "max_offsets_per_trigger": str(max_per_batch),
    }, environ={})
    spark = job.spark_session(config, app_name=f"stages-{variant}")
    try:
        records = job.read_events(spark, config)
        parsed = job.parse(records, config)
        if variant == "spark_kafka_job":
            from .jobproc import built_in_sink

            writer = built_in_sink(spark, config)
        elif variant == "spark_kafka":
            writer = _built_in(records, config).writeStream.format("kafka").outputMode("update").option(
                "kafka.bootstrap.servers", bootstrap).option("topic", config.output_topic)
        elif variant == "parse":
            writer = steps.kept(parsed, config).writeStream.format("noop")
        elif variant == "count":
            changes = steps.changes(parsed, config)
            writer = changes.frame.writeStream.format("noop").outputMode(changes.output_mode)
        else:
            writer, _sink = job.write_changes(steps.changes(parsed, config), config, origin=None)
        running = (writer.option("checkpointLocation", config.checkpoint_location)
                   .trigger(availableNow=True).start())
        running.awaitTermination()
        return [{"batch": p["batchId"], "rows": p["numInputRows"], "add_batch_ms": p["durationMs"]["addBatch"],
                 "trigger_ms": p["durationMs"]["triggerExecution"],
                 "phases_ms": {phase: p["durationMs"].get(phase, 0) for phase in PHASES}}
                for p in running.recentProgress if p["numInputRows"]]
    finally:
        spark.stop()


def _built_in(records, config):
    """The built-in contender's query (bench/spark_kafka.py) on the job's source."""
    from pyspark.sql import functions as F

    key = config.key_field
    events = records.select(F.from_json(F.col("value").cast("string"), f"`{key}` STRING").alias("event")).select(
        F.col(f"event.`{key}`").alias(key))
    counts = events.where(F.col(key).isNotNull() & F.expr(config.filter)).groupBy(key).count()
    return counts.select(F.col(key).alias("key"),
                         F.to_json(F.struct(F.col(key).alias("key"), F.col("count").alias("count"))).alias("value"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--max-per-batch", type=int, default=50_000)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rounds", type=int, default=3, help="each variant this many times, in turn")
    parser.add_argument("--malformed-rate", type=float, default=0.0,
                        help="share of malformed records (sample.malformed_values), e.g. 0.01")
    parser.add_argument("--out", default="stages.json")
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if unknown := sorted(set(variants) - set(VARIANTS)):
        raise SystemExit(f"stages: unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")

    from {{ cookiecutter.package_name }}.config import JobConfig

    from ..kafka_io import create_topics
    from ..kafka_local import provide_kafka
    from ..sample import SAMPLE_KEYS{% if cookiecutter.query == "windowed-count" %}, event_times{% endif %}, keep_all, make_events, produce

    results: dict[str, list[list[dict]]] = {variant: [] for variant in variants}
    with tempfile.TemporaryDirectory(prefix="stages-") as scratch, provide_kafka(Path(scratch)) as kafka:
        topic = f"stages-{uuid.uuid4().hex[:8]}"
        create_topics(kafka.bootstrap_servers, {topic: args.partitions, f"{topic}-out": 2, f"{topic}-dead": 1})
        config = JobConfig()  # only times are measured: the expected counts are not needed
        sample = make_events(args.events, 7, config.schema, config.key_field, keep_all,
                             malformed_rate=args.malformed_rate, keys=list(SAMPLE_KEYS)
                             {%- if cookiecutter.query == "windowed-count" %},
                             event_times=event_times(config){% endif %})
        produce(kafka.bootstrap_servers, topic, sample.values, partitions=args.partitions)
        print(f"stages: {args.events} events ({sample.malformed} malformed) over {args.partitions} partitions, "
              f"at most {args.max_per_batch} per batch, {args.rounds} round(s)", flush=True)
        # Round after round, every variant in turn: the JVM warms up in the first round, and a
        # noisy moment hits one run of a variant, not all of them.
        for round_number in range(1, args.rounds + 1):
            for variant in variants:
                batches = measure(kafka.bootstrap_servers, topic, variant, args.max_per_batch, Path(scratch))
                results[variant].append(batches)
                steady = [b["trigger_ms"] for b in batches[1:]]
                print(f"stages: round {round_number} {variant}: triggerExecution ms per batch "
                      f"{[b['trigger_ms'] for b in batches]}, steady median "
                      f"{statistics.median(steady) if steady else 'n/a'}", flush=True)
    summary: dict[str, float] = {}
    phases: dict[str, dict[str, float]] = {}
    for variant, runs in results.items():
        counted = [run for run in (runs[1:] or runs) if len(run) > 1]  # rounds after the first, batches after the first
        if counted:
            summary[variant] = statistics.median(statistics.median(b["trigger_ms"] for b in run[1:]) for run in counted)
            phases[variant] = {phase: statistics.median(b["phases_ms"][phase] for run in counted for b in run[1:])
                               for phase in PHASES}
    for variant, ms in summary.items():
        print(f"stages: {variant}: steady triggerExecution median {ms:.0f} ms per batch (rounds after the first); "
              f"phase medians {phases[variant]}")
    Path(args.out).write_text(json.dumps({"events": args.events, "partitions": args.partitions,
                                          "max_per_batch": args.max_per_batch, "rounds": results,
                                          "steady_trigger_ms": summary, "steady_phases_ms": phases}, indent=1))
    print(f"stages: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
