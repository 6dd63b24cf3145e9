"""`demo`: a local Kafka, sample events, the job run until the input is drained, and the
published counts (read with read_committed) printed next to the expected ones."""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from pathlib import Path

from {{ cookiecutter.package_name }}.config import DEFAULT_CONFIG_PATH, load_config
from {{ cookiecutter.package_name }}.kafka.topics import create_topics

from .kafka_local import daemon
from .readback import read_published
from .sample import configured_sample, produce, spark_filter

log = logging.getLogger(__name__)


def run_demo(workdir: Path, count: int, keep_kafka: bool = False) -> int:
    from {{ cookiecutter.package_name }}.job import build_query, spark_session
    from {{ cookiecutter.package_name }}.supervision.runner import run

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    overrides = {"checkpoint_location": str(workdir / "checkpoints"), "trigger_interval_seconds": "1"}
    if bootstrap:  # a shared cluster: give this run topics and a sink id of its own
        suffix = uuid.uuid4().hex[:8]
        base = load_config(DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None)
        for option in ("input_topic", "output_topic", "dead_letter_topic", "marker_topic", "sink_id"):
            overrides[option] = f"{getattr(base, option)}-{suffix}"
    else:
        daemon.down(workdir / "kafka")
        shutil.rmtree(workdir, ignore_errors=True)
        bootstrap = daemon.up(workdir / "kafka")
    overrides["bootstrap_servers"] = bootstrap
    config = load_config(DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None, overrides)
    try:
        for line in create_topics(config, partitions=4):
            print(line)
        started = time.monotonic()
        spark = spark_session(config)
        try:
            # The expected counts: the configured filter evaluated by Spark SQL on the events, apart from the job.
            keep = spark_filter(spark, config.filter, config.schema)
            sample = configured_sample(config, keep, count, seed=7, malformed_rate=0.01)
            produce(config.bootstrap_servers, config.input_topic, sample.values)
            print(f"produced {count} events ({sample.malformed} malformed) to {config.input_topic}")
            run(spark, config, build_query, until_idle_batches=3)
        finally:
            spark.stop()
        elapsed = time.monotonic() - started
        published = read_published(config.bootstrap_servers, config.output_topic, config.dead_letter_topic)
        return _report(published.final_counts(), dict(sample.expected_counts), len(published.dead_letters),
                       sample.malformed, count, elapsed)
    finally:
        if not keep_kafka and not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            daemon.down(workdir / "kafka")


def _report(counts: dict[str, int], expected: dict[str, int], dead: int, malformed: int,
            total: int, elapsed: float) -> int:
    print(f"\n{'key':<12}{'published':>12}{'expected':>12}")
    keys = sorted(set(counts) | set(expected))
    for key in keys:
        mark = "" if counts.get(key) == expected.get(key) else "   <-- MISMATCH"
        print(f"{key:<12}{counts.get(key, 0):>12}{expected.get(key, 0):>12}{mark}")
    print(f"{'dead letters':<12}{dead:>12}{malformed:>12}")
    ok = counts == expected and dead == malformed
    print(f"\ndemo: {'OK' if ok else 'FAILED'}: {total} events in {elapsed:.1f}s (including Spark start-up)")
    return 0 if ok else 1
