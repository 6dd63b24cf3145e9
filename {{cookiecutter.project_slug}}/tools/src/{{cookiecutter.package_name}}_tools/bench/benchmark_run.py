"""One benchmark run: a broker, each contender in turn on the same input, the phase-2
microbenchmark, optionally the scaling runs; then the JSON, the Markdown table, the plots and
the summary line (printed last)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.metadata
import os
import platform
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from {{ cookiecutter.package_name }}.spark.session import KAFKA_CONNECTOR

from ..kafka_local import provide_kafka
from ..schema_registry import SchemaRegistry
from .measure import Profile, Run, add_backlog_run, add_latency_run, drop_samples, warm_job_start
from .microbench import commit_microbench
from .report import SCALING_AXES, markdown, plots, write_results
from .stats import CONTENDERS, RESULT_SCHEMA, contender_result, summary, summary_line, validate
from .workload import warm_broker

# With Avro values: the contenders that read and write them in the JVM. plain_eos would decode in
# Python; spark_kafka_job's built-in sink writes no batch id, which the answers' schema ends with.
REGISTRY_CONTENDERS = ("eos", "alos", "spark_kafka")
# The exactly-once contenders whose recovery after SIGKILL is measured: the job, and Flink, the peer
# a team weighs it against.
RECOVERED = ("eos", "flink")


def _loadavg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _profile(args: argparse.Namespace) -> Profile:
    return Profile(events=args.events, partitions=args.partitions, keys=args.keys, rate=args.rate,
                   latency_seconds=args.latency_seconds, trigger_seconds=args.trigger_seconds,
                   max_per_batch=args.max_per_batch, commit_shards=args.commit_shards, publish_from=args.publish_from,
                   latency_rounds=args.latency_rounds,
                   plain_commit_ms=args.plain_commit_ms, seed=args.seed, value_format=args.format)


SCALING_KEYS = (10, 10_000, 1_000_000)
SCALING_PARTITIONS = (4, 16, 64)
SCALING_RECORD_BYTES = (100, 1_000, 10_000)
# A backlog of at most this many bytes at each record size: 10 KB events, 30,000 of them.
SCALING_BACKLOG_BYTES = 300_000_000
# Contenders with a query of their own, the count per key: beside a query of another shape they
# would not compare the sink.
COUNT_ONLY = ("spark_kafka", "plain_eos", "flink")
SCALING_DIMENSIONS = ("keys", "partitions", "record_bytes", "shards")
# The job and the peers a team weighs it against, at every point of keys, partitions and record size.
PEERS = ("eos", "alos", "spark_kafka_job", "spark_kafka", "plain_eos", "flink")
# Enough to compile the broker's produce, transaction and read_committed fetch paths.
BROKER_WARM_UP_EVENTS = 500_000


def count_model(events: Iterable[Mapping[str, Any]], config: Any) -> Iterator[tuple[str, dict[str, object]]]:
    """The COUNT_ONLY contenders' query: how many events per key (the job's query is the same
    when its model answers as this does)."""
    from {{ cookiecutter.package_name }}.pipeline.query import as_key

    counts: Counter[str] = Counter()
    for event in events:
        key = as_key(event[config.key_field])
        counts[key] += 1
        yield key, {"key": key, "count": counts[key]}


def _scaling(bootstrap: str, base: Profile, workdir: Path, log, dimensions: tuple[str, ...] = SCALING_DIMENSIONS,
             chosen: tuple[str, ...] = CONTENDERS, rounds: int = 1) -> list[dict[str, Any]]:
    """Throughput only (no latency, no recovery) while one dimension varies. Distinct keys, the
    dimension state must scale with, run every contender on the same input (ratios in one run);
    `chosen`: the contenders to run (--contenders); `rounds`: runs of each point per contender,
    every other round in reverse order (scaling_row takes their median)."""
    variants: list[tuple[str, Any, Profile, tuple[str, ...]]] = []
    for keys in SCALING_KEYS if "keys" in dimensions else ():
        events = max(base.events, keys)  # every key in one batch: distinct keys per batch = keys
        # A bigger batch takes longer: the time-out grows with it (a 1,000,000-event batch gets 20 min).
        variants.append((SCALING_AXES["keys"], keys, dataclasses.replace(
            base, keys=keys, events=events, max_per_batch=events, timeout=max(base.timeout, events * 1.2e-3)), PEERS))
    for partitions in SCALING_PARTITIONS if "partitions" in dimensions else ():
        variants.append((SCALING_AXES["partitions"], partitions, dataclasses.replace(base, partitions=partitions),
                         PEERS))
    # Padding is a JSON field no query reads; Avro and Protobuf values hold the schema's fields only.
    for size in SCALING_RECORD_BYTES if "record_bytes" in dimensions and base.value_format == "json" else ():
        variants.append((SCALING_AXES["record_bytes"], size, dataclasses.replace(
            base, record_bytes=size, events=min(base.events, SCALING_BACKLOG_BYTES // size)), PEERS))
    for shards in (1, 2, 4) if "shards" in dimensions else ():  # where publishing in tasks pays: big batches
        keys = SCALING_KEYS[-1]
        variants.append((f"commit shards ({keys:,} keys per batch)", shards, dataclasses.replace(
            base, commit_shards=shards, keys=keys, events=keys, max_per_batch=keys,
            timeout=max(base.timeout, keys * 1.2e-3)), ("eos",)))
    rows = []
    for dimension, value, profile, names in variants:
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names if n in chosen}
        for round_number in range(1, rounds + 1):
            order = list(runs) if round_number % 2 else list(reversed(runs))
            for name in order:
                of = f", round {round_number}/{rounds}" if rounds > 1 else ""
                log(f"bench: scaling {dimension}={value}: {name}{of}")
                runs[name].append(Run(name, bootstrap, profile, workdir).measure(latency=False, log=log))
        rows += [scaling_row(dimension, value, name, results) for name, results in runs.items()]
    return rows


def scaling_row(dimension: str, value: Any, contender: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    """A scaling point of one contender from its rounds: the median events/s of the rounds that
    measured one (each round's listed, None for a failed one); the driver CPU, the sink's stages
    and the memory of the middle round (the lower of the two middle ones of an even count); the
    first error of any round; whether every round's output counts were exact, key by key."""
    measured = sorted((r for r in results if (r.get("throughput") or {}).get("eps")),
                      key=lambda r: r["throughput"]["eps"])
    middle = measured[(len(measured) - 1) // 2] if measured else {}
    throughput = middle.get("throughput") or {}
    return {"dimension": dimension, "value": value, "contender": contender,
            "eps": statistics.median(r["throughput"]["eps"] for r in measured) if measured else None,
            "eps_rounds": [(r.get("throughput") or {}).get("eps") for r in results],
            "error": next((r["error"] for r in results if r.get("error")), None),
            "verified": all(r.get("verified") for r in results),
            "driver_cpu_s_per_million_records": throughput.get("driver_cpu_s_per_million_records"),
            "sink_stages": (middle.get("profile") or {}).get("sink_stages"),
            "peak_memory_mb": middle.get("peak_memory_mb")}


def _dimensions(args: argparse.Namespace) -> tuple[str, ...]:
    dimensions = tuple(d.strip() for d in args.scaling_dimensions.split(",") if d.strip())
    if unknown := set(dimensions) - set(SCALING_DIMENSIONS):
        raise SystemExit(f"bench: --scaling-dimensions: {', '.join(sorted(unknown))} is not one of "
                         f"{', '.join(SCALING_DIMENSIONS)}")
    return dimensions


def _caught_up(bootstrap: str, base: Profile, workdir: Path, names: list[str], args: argparse.Namespace,
               log) -> dict[str, Any]:
    """The job as it runs in production: caught up, events at a steady rate, the trigger of the
    template's answer. Per contender: latency and batch times (no backlog)."""
    profile = dataclasses.replace(base, rate=args.caught_up_rate, trigger_seconds=args.caught_up_trigger)
    rows: dict[str, Any] = {"rate_eps": profile.rate, "trigger_s": profile.trigger_seconds}
    for name in [n for n in ("eos", "alos", "spark_kafka_job", "spark_kafka", "flink") if n in names]:
        log(f"bench: caught up at {profile.rate:g} events/s, trigger {profile.trigger_seconds:g}s: {name}")
        result = Run(name, bootstrap, profile, workdir).measure(latency=True, backlog=False, log=log)
        rows[name] = {key: drop_samples(result).get(key) for key in ("latency", "error", "verified")}
    return rows


@contextlib.contextmanager
def _registry(value_format: str, workdir: Path, log) -> Iterator[SchemaRegistry | None]:
    """A schema registry for Avro or Protobuf values, stopped after the run; None for JSON."""
    if value_format == "json":
        yield None
        return
    registry = SchemaRegistry(workdir / "registry")
    seconds = registry.start(log=log)
    log(f"bench: schema registry at {registry.url}, up in {seconds:.1f}s")
    try:
        yield registry
    finally:
        registry.stop()


def _contenders(args: argparse.Namespace, log) -> list[str]:
    """The contenders asked for that time this job's query in this run's format."""
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    unknown = sorted(set(names) - set(CONTENDERS))
    if unknown:
        raise SystemExit(f"bench: unknown contender(s) {unknown}; choose from {', '.join(CONTENDERS)}")

    from {{ cookiecutter.package_name }}.config import JobConfig
    from {{ cookiecutter.package_name }}.pipeline.fingerprint import fingerprint

    counts = fingerprint(JobConfig()) == fingerprint(JobConfig(), count_model)
    if not counts and (counting := [n for n in names if n in COUNT_ONLY]):
        names = [n for n in names if n not in COUNT_ONLY]  # they would time another query
        log(f"bench: {', '.join(counting)} count events per key; this job's query computes another answer: not run")
    if args.format != "json" and (other := [n for n in names if n not in REGISTRY_CONTENDERS]):
        names = [n for n in names if n in REGISTRY_CONTENDERS]
        log(f"bench: {', '.join(other)} not run with {args.format} values "
            f"(contenders: {', '.join(REGISTRY_CONTENDERS)})")
    return names


def run_bench(args: argparse.Namespace) -> int:
    started = time.monotonic()
    out = Path(args.out).resolve()  # contenders run in their own directories
    workdir = out / "runs"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    profile = _profile(args)

    def log(message: str) -> None:
        print(message, flush=True)

    names = _contenders(args, log)
    environment: dict[str, Any] = {
        "cpus": os.cpu_count(), "loadavg_before": _loadavg(), "python": platform.python_version(),
        "pyspark": importlib.metadata.version("pyspark"),
        "confluent_kafka": importlib.metadata.version("confluent-kafka"),
    }
    contenders: dict[str, dict[str, Any]] = {}
    environment["spark_kafka_connector"] = KAFKA_CONNECTOR

    with provide_kafka(workdir) as kafka, _registry(args.format, workdir, log) as registry:
        log(kafka.describe())
        if registry is not None:
            profile = dataclasses.replace(profile, registry=registry.url)
            environment["schema_registry"] = "Apicurio Registry (a process)"
        environment["kafka"] = kafka.provider
        warm_up = min(profile.events, BROKER_WARM_UP_EVENTS)
        log(f"bench: warming the broker up with {warm_up} events (untimed)")
        environment["broker_warm_up_s"] = round(warm_broker(kafka.bootstrap_servers, profile.partitions, warm_up), 1)
        if {"eos", "alos", "spark_kafka_job"} & set(names):
            warm_job_start(kafka.bootstrap_servers, workdir, log, profile)
        if "flink" in names:  # set up before any clock runs: PyFlink's venv and the connector, once per machine
            from . import flink_env

            flink_env.python(log)
            flink_env.connector_jar(log)
        for round_number in range(1, args.rounds + 1):
            # Every other round in reverse order: whatever drifts during a run (the broker's JIT
            # and caches, the machine) favours no contender; each one's figure is the median.
            order = names if round_number % 2 else names[::-1]
            for position, name in enumerate(order, 1):
                log(f"bench: round {round_number}/{args.rounds}, {name}: {contender_result(name)['label']}")
                run = Run(name, kafka.bootstrap_servers, profile, workdir)
                if round_number == 1:  # the full measurement; later rounds time the backlog (and latency) again
                    contenders[name] = run.measure(recovery=(name in RECOVERED and not args.no_recovery), log=log)
                    add_backlog_run(contenders[name], contenders[name], round_number, position)
                    add_latency_run(contenders[name], contenders[name], round_number, position)
                else:
                    again = run.measure(latency=round_number <= profile.latency_rounds, log=log)
                    add_backlog_run(contenders[name], again, round_number, position)
                    add_latency_run(contenders[name], again, round_number, position)
        for result in contenders.values():
            drop_samples(result)
        commit: dict[str, Any] = {"runs": []}
        try:
            for shards in (1, 4):
                log(f"bench: phase-2 microbenchmark, {args.commit_rows} rows, {shards} shard(s)")
                commit["runs"].append(commit_microbench(kafka.bootstrap_servers, args.commit_rows, shards,
                                                        args.commit_batches, workdir))
        except Exception as error:  # noqa: BLE001 - reported with the results
            commit["error"] = f"{type(error).__name__}: {error}"
        caught_up = _caught_up(kafka.bootstrap_servers, profile, workdir, names, args, log)
        scaling = (_scaling(kafka.bootstrap_servers, profile, workdir, log, _dimensions(args), tuple(names),
                            args.scaling_rounds) if args.scaling else None)

    environment["loadavg_after"] = _loadavg()
    results: dict[str, Any] = {
        "schema": RESULT_SCHEMA,
        "profile": profile.as_dict(),
        "environment": environment,
        "contenders": {n: contenders[n] for n in CONTENDERS if n in contenders},
        "commit_microbench": commit,
        "caught_up": caught_up,
        "scaling": scaling,
    }
    results["summary"] = summary(results["contenders"], commit, caught_up)
    results["summary_line"] = summary_line(results["summary"])
    results["duration_s"] = round(time.monotonic() - started, 1)
    problems = validate(results)
    if problems:
        results["problems"] = problems
    out.mkdir(parents=True, exist_ok=True)
    write_results(out, "bench-results", results, markdown(results), plots(results, out), "bench",
                  f" in {results['duration_s']:.0f}s")
    failed = [n for n, c in results["contenders"].items() if c.get("error")] + (["commit"] if "error" in commit else [])
    if failed:
        print(f"bench: failed: {', '.join(failed)}")
    print(results["summary_line"], flush=True)
    return 1 if failed or problems else 0
