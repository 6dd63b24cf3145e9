"""The pure parts of the benchmark: percentiles, the latency definition, the result document
and its summary line. No Kafka, no Spark: unit-tested in tests/unit/test_bench.py."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

RESULT_SCHEMA = "bench-results/1"
# The contenders, in the order of the table and of the summary line.
CONTENDERS = ("eos", "alos", "spark_kafka_job", "spark_kafka", "plain_eos", "flink")
LABELS = {
    "eos": "this job, exactly-once (2PC sink)",
    "alos": "this job, at-least-once",
    "spark_kafka_job": "this job's query, Spark's built-in Kafka sink (at-least-once)",
    "spark_kafka": "Spark built-in Kafka source + sink, minimal query: key only, no dead letters (at-least-once)",
    "plain_eos": "plain confluent-kafka loop, Kafka transactions (exactly-once)",
    "flink": "Flink (PyFlink Table API, mini-cluster): Kafka source, upsert-Kafka sink, exactly-once",
}
SUMMARY_FIELDS = ("eos_eps", "alos_eps", "spark_kafka_job_eps", "spark_kafka_eps", "plain_eos_eps", "flink_eps",
                  "eos_over_alos", "eos_over_spark_kafka_job", "eos_over_spark_kafka", "eos_over_flink",
                  "commit_p50_ms", "recovery_s", "caught_up_latency_p50_ms", "caught_up_batch_p50_ms",
                  "caught_up_batches_late")


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's
    default); None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not within 0..100")
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(values: Sequence[float], scale: float = 1.0) -> dict[str, float | int | None]:
    """count, p50, p90, p99, max and mean of `values` multiplied by `scale` (e.g. 1000 for ms)."""
    scaled = [v * scale for v in values]
    return {
        "count": len(scaled),
        "p50": _round(percentile(scaled, 50)),
        "p90": _round(percentile(scaled, 90)),
        "p99": _round(percentile(scaled, 99)),
        "max": _round(max(scaled) if scaled else None),
        "mean": _round(sum(scaled) / len(scaled) if scaled else None),
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def output_latencies(
    produced_at: dict[str, list[float]],
    base_counts: dict[str, int],
    outputs: Iterable[tuple[float, str, int]],
) -> list[float]:
    """End-to-end latency of each output record of the measured window, in seconds.

    A count output aggregates many events, so its latency is defined per record as
    `visible_at - produced_at[key][count - base - 1]`: the time from the moment the count
    became true in the input (the count-th event of that key, in produce order, was produced)
    to the moment a read_committed consumer of the output saw that count. It is never
    negative (a count cannot be visible before its events exist) and needs nothing from the
    contender but its output.

    - `produced_at[key]`: produce times of the window's events of `key`, in produce order
      (events the filter drops are not in it);
    - `base_counts[key]`: the key's count before the window (warm-up and backlog);
    - `outputs`: (visible_at, key, count) as the consumer saw them.

    Counts at or below the base belong to earlier phases and are skipped; so is a repeated
    (key, count) (an at-least-once duplicate): only its first visibility counts.
    """
    seen: set[tuple[str, int]] = set()
    latencies = []
    for visible_at, key, count in outputs:
        index = count - base_counts.get(key, 0) - 1
        times = produced_at.get(key, [])
        if index < 0 or index >= len(times) or (key, count) in seen:
            continue
        seen.add((key, count))
        latencies.append(visible_at - times[index])
    return latencies


def events_per_second(events: int, seconds: float | None) -> float | None:
    if seconds is None or seconds <= 0:
        return None
    return round(events / seconds, 1)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)


def summary(contenders: dict[str, dict[str, Any]], commit: dict[str, Any] | None,
            caught_up: dict[str, Any] | None = None) -> dict[str, float | None]:
    """The figures of the last line, from the result document's parts."""
    caught_up_eos = ((caught_up or {}).get("eos") or {}).get("latency") or {}
    caught_up_batches = caught_up_eos.get("batches") or {}

    def eps(name: str) -> float | None:
        return ((contenders.get(name) or {}).get("throughput") or {}).get("eps")

    recovery = (contenders.get("eos") or {}).get("recovery") or {}
    return {
        "eos_eps": eps("eos"),
        "alos_eps": eps("alos"),
        "spark_kafka_job_eps": eps("spark_kafka_job"),
        "spark_kafka_eps": eps("spark_kafka"),
        "plain_eos_eps": eps("plain_eos"),
        "flink_eps": eps("flink"),
        "eos_over_alos": ratio(eps("eos"), eps("alos")),
        "eos_over_spark_kafka_job": ratio(eps("eos"), eps("spark_kafka_job")),
        "eos_over_spark_kafka": ratio(eps("eos"), eps("spark_kafka")),
        "eos_over_flink": ratio(eps("eos"), eps("flink")),
        "commit_p50_ms": (((commit or {}).get("runs") or [{}])[0].get("commit_ms") or {}).get("p50"),
        "recovery_s": recovery.get("seconds"),
        "caught_up_latency_p50_ms": (caught_up_eos.get("ms") or {}).get("p50"),
        "caught_up_batch_p50_ms": (caught_up_batches.get("ms") or {}).get("p50"),
        "caught_up_batches_late": caught_up_batches.get("over_trigger_plus_1500ms"),
    }


def summary_line(values: dict[str, float | None]) -> str:
    """`bench: eos_eps=X alos_eps=Y ...`; a figure that could not be measured is `nan`."""
    parts = []
    for name in SUMMARY_FIELDS:
        value = values.get(name)
        parts.append(f"{name}={'nan' if value is None else _format(value)}")
    return "bench: " + " ".join(parts)


def _format(value: float) -> str:
    if float(value).is_integer() and abs(value) >= 100:
        return str(int(value))
    return f"{value:.4g}" if abs(value) < 100 else f"{value:.1f}"


def contender_result(name: str) -> dict[str, Any]:
    """The empty result of one contender; the runner fills it in."""
    return {
        "label": LABELS.get(name, name),
        "guarantee": "at-least-once" if name in ("alos", "spark_kafka_job", "spark_kafka") else "exactly-once",
        "startup_s": None,
        "throughput": None,  # {"events", "seconds", "eps"}
        "latency": None,  # {"rate_eps", "seconds", "events", "records", "ms": distribution}
        "peak_memory_mb": None,  # {"driver_python", "jvm", "driver_total", "python_workers"}
        "recovery": None,  # {"seconds", ...}
        "verified": None,  # final counts == expected counts
        "error": None,
    }


def validate(results: dict[str, Any]) -> list[str]:
    """What is wrong with the shape of a result document (empty when nothing is)."""
    problems = []
    for key in ("schema", "profile", "environment", "contenders", "commit_microbench", "summary", "summary_line",
                "duration_s"):
        if key not in results:
            problems.append(f"missing {key!r}")
    if results.get("schema") != RESULT_SCHEMA:
        problems.append(f"schema is {results.get('schema')!r}, expected {RESULT_SCHEMA!r}")
    for name, contender in (results.get("contenders") or {}).items():
        if name not in CONTENDERS:
            problems.append(f"unknown contender {name!r}")
        for key in contender_result(name):
            if key not in contender:
                problems.append(f"contender {name!r}: missing {key!r}")
        throughput = contender.get("throughput")
        if throughput is not None and not {"events", "seconds", "eps"} <= set(throughput):
            problems.append(f"contender {name!r}: throughput needs events, seconds, eps")
        latency = contender.get("latency")
        if latency is not None and not {"p50", "p99"} <= set(latency.get("ms") or {}):
            problems.append(f"contender {name!r}: latency needs ms.p50 and ms.p99")
    summary_values = results.get("summary") or {}
    missing = [name for name in SUMMARY_FIELDS if name not in summary_values]
    if missing:
        problems.append(f"summary misses {missing}")
    elif results.get("summary_line") != summary_line(summary_values):
        problems.append("summary_line does not match summary")
    return problems
