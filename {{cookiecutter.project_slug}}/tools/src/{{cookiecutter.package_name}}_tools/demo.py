"""`demo`: a local Kafka (and a local schema registry, for Avro values), sample events, the job
run until the input is drained, and the answers it published (read with read_committed) printed
next to those the query's model expects: each key's last answer, or for an append output its
number of records."""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from pathlib import Path

from {{ cookiecutter.package_name }}.config import DEFAULT_CONFIG_PATH, load_config
from {{ cookiecutter.package_name }}.kafka.topics import create_topics
from {{ cookiecutter.package_name }}.pipeline import query

from . import schema_registry
from .kafka_local import daemon
from .readback import Answer, Published, read_published
from .sample import configured_sample, produce, spark_filter
from .value_formats import output_values
from .verify import Expected, published_records, records_per_key

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
    registry = workdir / "registry"
    try:
        if config.uses_registry:  # the registry the job file names is not this machine's: a local one
            config = load_config(DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None,
                                 {**overrides, "schema_registry.url": schema_registry.up(registry)})
        for line in create_topics(config, partitions=4):
            print(line)
        started = time.monotonic()
        spark = spark_session(config)
        try:
            # The kept events: the configured filter evaluated by Spark SQL on the events, apart from the job.
            keep = spark_filter(spark, config.filter, config.schema)
            sample = configured_sample(config, keep, count, seed=7, malformed_rate=0.01)
            produce(config.bootstrap_servers, config.input_topic, sample.values)
            print(f"produced {count} events ({sample.malformed} malformed) to {config.input_topic}")
            run(spark, config, build_query, until_idle_batches=3)
        finally:
            spark.stop()
        elapsed = time.monotonic() - started
        published = read_published(config.bootstrap_servers, config.output_topic, config.dead_letter_topic,
                                   as_json=output_values(config).as_json)
        expected = Expected.of(lambda events: query.model(events, config), sample.kept_events, query.OUTPUT)
        return _report(published, expected, sample.malformed, count, elapsed)
    finally:
        schema_registry.down(registry)
        if not keep_kafka and not os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            daemon.down(workdir / "kafka")


def _report(published: Published, expected: Expected, malformed: int, total: int, elapsed: float) -> int:
    """Each key's last published answer (the output value without the batch id) beside the
    query's model's, or its number of records for an append output; then the dead letters beside
    the malformed records produced."""
    if expected.kind == "append":
        found, modelled_per_key = records_per_key(published_records(published)), records_per_key(expected.records)
        print(f"\n{'key':<14}records published (read_committed)")
        for key in sorted(expected.keys() | set(published.answers)):
            records, modelled = found[key], modelled_per_key[key]
            print(f"{key:<14}{records}" + ("" if records == modelled else f", expected {modelled}   <-- MISMATCH"))
    else:
        answers = published.final_answers()
        print(f"\n{'key':<14}last answer published (read_committed)")
        for key in sorted(set(answers) | set(expected.answers)):
            got, wanted = answers.get(key), expected.answers.get(key)
            shown = _shown(got) if got == wanted else f"{_shown(got)}, expected {_shown(wanted)}   <-- MISMATCH"
            print(f"{key:<14}{shown}")
    dead = len(published.dead_letters)
    print(f"{'dead letters':<14}{dead} ({malformed} malformed records produced)")
    ok = expected.met_by(published) and dead == malformed
    print(f"\ndemo: {'OK' if ok else 'FAILED'}: {total} events in {elapsed:.1f}s (including Spark start-up)")
    return 0 if ok else 1


def _shown(answer: Answer | None) -> str:
    """An answer without the key it repeats."""
    if answer is None:
        return "-"
    return ", ".join(f"{name} {value}" for name, value in answer.items() if name != "key")
