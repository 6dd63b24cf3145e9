"""The job's own metrics, in Prometheus format on the driver (`metrics_port`), next to Spark's
(the UI port's `/metrics/prometheus`, served by Spark itself): what the commit protocol did and
how far the input is ahead. Spark's metrics say how the query runs; these say what reached Kafka.

Every series has the sink id as a label, so that one Prometheus can scrape several jobs. The
counters count what this driver process did since it started (Prometheus handles the reset on a
restart); the gauges hold the latest value. The exactly-once sink publishes from the driver and
feeds them all; the at-least-once sink produces from Spark's tasks, which only Spark's metrics see.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ..failures import ConfigError

M = TypeVar("M", Counter, Gauge, Histogram)

# Not the client's global registry: the job's series only, none of the client's process metrics.
REGISTRY = CollectorRegistry()


def _series(kind: type[M], name: str, documentation: str, *labels: str, **options: Any) -> M:
    """A series of the job's registry, labelled with the sink id and then `labels`."""
    return kind(name, documentation, ["sink_id", *labels], registry=REGISTRY, **options)


PHASE2_SECONDS = _series(
    Histogram, "eos_sink_phase2_seconds", "Phase 2 of a batch: its log entries, Kafka transactions and commits",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0))
RECORDS_PUBLISHED = _series(
    Counter, "eos_sink_records_published", "Records published in committed transactions (markers not counted)",
    "topic")
BATCH_RECORDS = _series(Gauge, "eos_sink_batch_records", "Records of the last published batch", "topic")
LAST_COMMIT_TIME = _series(
    Gauge, "eos_sink_last_commit_timestamp_seconds", "When the last batch was published (Unix time)")
LAST_COMMITTED_BATCH = _series(
    Gauge, "eos_sink_last_committed_batch", "The last batch whose transaction this shard committed", "shard")
COMMIT_RETRIES = _series(
    Counter, "eos_sink_commit_retries", "Commits retried after a time-out, and transactions tried again after an abort")
COMMIT_FAILURES = _series(
    Counter, "eos_sink_commit_failures", "Batches whose phase 2 failed (Spark runs them again)")
FENCED = _series(
    Counter, "eos_sink_fenced", "Times another producer with this sink's transactional id fenced this one")
RERUN_MISMATCH = _series(
    Counter, "eos_sink_rerun_mismatch",
    "Re-runs of a batch whose records differ from the first attempt's (a query that is not deterministic)")
MARKER_WAIT = _series(
    Gauge, "eos_sink_marker_wait_seconds",
    "How long the sink has been waiting for another producer's transaction on the marker topic; 0 when not")
BATCHES_PUBLISHED_FROM = _series(
    Counter, "eos_sink_batches_published_from", "Batches whose phase 2 ran on the driver or in Spark tasks", "place")
INPUT_LAG = _series(
    Gauge, "eos_input_lag_records", "Records in the input partition not yet read, after the last batch",
    "topic", "partition")
TRIGGER_RUNNING = _series(
    Gauge, "eos_trigger_running_seconds",
    "How long the running trigger (a batch, its commit) has taken so far; 0 between")
LAST_BATCH = _series(Gauge, "eos_last_batch", "The last batch the query completed, and its input rows", "figure")

def serve(port: int, host: str) -> None:
    """Serve the registry on http://host:port/metrics from a daemon thread of the driver."""
    try:
        start_http_server(port, addr=host, registry=REGISTRY)
    except OSError as error:
        raise ConfigError("metrics_port", f"cannot serve metrics on {host}:{port}: {error.strerror or error}"
                          ) from None


def record_progress(sink_id: str, batch_id: int, input_rows: int, lag: Mapping[tuple[str, str], int]) -> None:
    LAST_BATCH.labels(sink_id, "batch_id").set(batch_id)
    LAST_BATCH.labels(sink_id, "input_rows").set(input_rows)
    for (topic, partition), records in lag.items():
        INPUT_LAG.labels(sink_id, topic, partition).set(records)


_topics: dict[str, set[str]] = {}  # per sink id, the topics it has published to


def record_batch(sink_id: str, published: Mapping[str, int], phase2_seconds: float) -> None:
    """A published batch (one found published before a crash counts as none)."""
    PHASE2_SECONDS.labels(sink_id).observe(phase2_seconds)
    LAST_COMMIT_TIME.labels(sink_id).set_to_current_time()
    topics = _topics.setdefault(sink_id, set())
    topics.update(published)
    for topic in topics:
        records = published.get(topic, 0)
        RECORDS_PUBLISHED.labels(sink_id, topic).inc(records)
        BATCH_RECORDS.labels(sink_id, topic).set(records)
