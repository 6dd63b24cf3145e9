"""`bench`: the cost of exactly-once, measured side by side with the alternatives in ONE run on
the same input (absolute figures depend on the machine; the ratios are what to compare):

    eos          this job, exactly-once (2PC sink)           run as `run` runs it, a process
    alos         this job, at-least-once                     idem
    spark_kafka_job  this job's query, Spark's built-in sink  what the sink alone costs (at-least-once)
    spark_kafka  Spark's built-in Kafka source and sink       a minimal query: the key only, no dead letters
    plain_eos    one Python process with confluent-kafka      Kafka transactions with the offsets
    flink        Flink's Kafka pipeline (PyFlink, mini-cluster) exactly-once: upsert-Kafka sink, checkpoints
                 at the trigger interval; in a venv of its own, set up on first use (flink_env.py)

With `--format avro` the events and the answers are Avro under a schema registry (Apicurio,
started for the run): eos and alos decode as the job does, spark_kafka as teams write it by
hand (the header cut off, `from_avro` with one writer schema). `--format protobuf` the same with
Protobuf, spark_kafka decoding with the job's codec (spark-protobuf is not served here).

Writes bench-results.json, bench-results.md and PNG plots into --out, prints the table and, as
its last line, `bench: eos_eps=... alos_eps=... ... recovery_s=...`. Uses KAFKA_BOOTSTRAP_SERVERS
when set, else starts a broker (kafka_local.provide_kafka). Imports nothing heavy until run.
"""

from __future__ import annotations

import argparse

from .stats import CONTENDERS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="bench-out", help="output directory (default: bench-out)")
    parser.add_argument("--contenders", default=",".join(CONTENDERS),
                        help=f"comma-separated subset of {','.join(CONTENDERS)}")
    parser.add_argument("--events", type=int, default=1_000_000,
                        help="backlog size (default 1,000,000: 20 batches; a short one measures JIT warm-up)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="backlog runs per contender, every other round in reverse order (default 3)")
    parser.add_argument("--partitions", type=int, default=8, help="input partitions (default 8)")
    parser.add_argument("--keys", type=int, default=8, help="distinct keys (default 8: sample.py's SAMPLE_KEYS)")
    parser.add_argument("--rate", type=float, default=500.0, help="events/s of the latency phase (default 500)")
    parser.add_argument("--latency-rounds", type=int, default=1,
                        help="rounds that measure latency too (default 1; at most --rounds): its p50 and p99 are "
                             "then over every round's output records, each round's listed in the JSON")
    parser.add_argument("--caught-up-rate", type=float, default=1000.0,
                        help="events/s of the caught-up run (2 s trigger, as in production; default 1000)")
    parser.add_argument("--caught-up-trigger", type=float, default=2.0,
                        help="trigger interval of the caught-up run (default 2)")
    parser.add_argument("--latency-seconds", type=float, default=30.0, help="length of the latency phase (default 30)")
    parser.add_argument("--trigger-seconds", type=float, default=0.5, help="Spark trigger interval (default 0.5)")
    parser.add_argument("--max-per-batch", type=int, default=50_000,
                        help="records per Spark batch / plain transaction at most (default 50,000)")
    parser.add_argument("--commit-shards", type=int, default=1, help="commit_shards of the eos contender")
    parser.add_argument("--publish-from", choices=("auto", "tasks", "driver"), default="auto",
                        help="publish_from of the eos contender (default auto; `driver` publishes every batch from "
                             "the driver)")
    parser.add_argument("--plain-commit-ms", type=float, default=100.0,
                        help="transaction interval of the plain loop (default 100, Kafka Streams' EOS default)")
    parser.add_argument("--commit-rows", type=int, default=10_000, help="output rows per microbenchmark batch")
    parser.add_argument("--commit-batches", type=int, default=15, help="microbenchmark batches per setting")
    parser.add_argument("--no-recovery", action="store_true", help="skip the SIGKILL recovery measurement")
    parser.add_argument("--scaling", action="store_true",
                        help="also, throughput and peak memory of each contender as one dimension grows: keys "
                             "10/10k/1M, input partitions 4/16/64, record bytes 100/1k/10k (JSON), commit shards "
                             "1/2/4 at 1M keys (eos); plotted (adds 30+ minutes)")
    parser.add_argument("--scaling-dimensions", default="keys,partitions,record_bytes,shards",
                        help="the --scaling dimensions to run, a subset of keys,partitions,record_bytes,shards "
                             "(default all)")
    parser.add_argument("--scaling-rounds", type=int, default=1,
                        help="runs of each --scaling point per contender, every other round in reverse order; "
                             "the median counts (default 1; one 1,000,000-key batch varies by a fifth from run to run)")
    parser.add_argument("--seed", type=int, default=6, help="the same seed produces the same input")
    parser.add_argument("--format", choices=("json", "avro", "protobuf"), default="json",
                        help="the values in and out: json, or avro or protobuf in a schema registry's wire format "
                             "(a registry started for the run; the contenders eos, alos and spark_kafka, each "
                             "decoding in the JVM)")


def run(args: argparse.Namespace) -> int:
    if args.rounds < 1:
        raise SystemExit("bench: --rounds must be at least 1")
    if not 1 <= args.latency_rounds <= args.rounds:
        raise SystemExit(f"bench: --latency-rounds must be between 1 and --rounds ({args.rounds})")
    if args.scaling_rounds < 1:
        raise SystemExit("bench: --scaling-rounds must be at least 1")
    from .benchmark_run import run_bench

    return run_bench(args)
