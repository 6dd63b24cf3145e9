"""Phase 2 alone, in this process: `coordinator.commit_batch` on batches of records as the sink
hands them over (Arrow, with a shard column when there are several shards), against the real
broker. Its steps are timed by wrapping the coordinator's own functions for the duration of the
measurement (its code is not changed): the sink log writes, producing, and the Kafka commit."""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..kafka_io import create_topics, delete_topics
from .stats import distribution


@contextmanager
def _timed(module: Any, name: str, spent: dict[str, float]):
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - started

    setattr(module, name, wrapper)
    try:
        yield
    finally:
        setattr(module, name, original)


def _rows(count: int, batch_id: int, topic: str, shards: int):
    import pyarrow as pa

    from {{ cookiecutter.package_name }}.sink.batch_records import RECORDS_SCHEMA, SHARD

    keys = [f"k{i:07d}" for i in range(count)]
    table = pa.Table.from_pydict({
        "topic": [topic] * count,
        "key": [k.encode() for k in keys],
        "value": [json.dumps({"key": k, "count": batch_id + 1}).encode() for k in keys],
    }, schema=RECORDS_SCHEMA)
    if shards == 1:
        return table
    return table.append_column(SHARD, pa.array([i % shards for i in range(count)], pa.int32()))


def commit_microbench(bootstrap: str, rows: int, shards: int, batches: int, workdir: Path) -> dict[str, Any]:
    """Commit `batches` batches of `rows` output rows each; the first batch (producer start-up,
    init_transactions, marker topic) is reported apart."""
    from {{ cookiecutter.package_name }}.sink import coordinator, producers, shard_transaction, sink_log
    from {{ cookiecutter.package_name }}.sink.settings import SinkSettings

    suffix = uuid.uuid4().hex[:8]
    output, markers = f"bench-commit-out-{suffix}", f"bench-commit-markers-{suffix}"
    create_topics(bootstrap, {output: 4})
    checkpoint = tempfile.mkdtemp(prefix="commit-", dir=workdir)
    settings = SinkSettings(
        bootstrap_servers=bootstrap, checkpoint=checkpoint, sink_id=f"bench-{suffix}",
        transactional_id_prefix="bench", marker_topic=markers, shards=shards, commit_timeout_seconds=60,
        client={},
    )
    per_batch: list[dict[str, float]] = []
    first = None
    pool = producers.ProducerPool()
    try:
        for batch_id in range(batches + 1):
            table = _rows(rows, batch_id, output, shards)
            spent: dict[str, float] = defaultdict(float)
            with (_timed(sink_log.SinkLog, "write", spent), _timed(coordinator, "run_shard_transaction", spent),
                  _timed(shard_transaction, "_commit", spent)):
                started = time.perf_counter()
                coordinator.commit_batch(settings, table, batch_id, pool)
                total = time.perf_counter() - started
            timing = {
                "commit": total,
                "log_write": spent["write"],
                "produce": spent["run_shard_transaction"] - spent["_commit"],
                "kafka_commit": spent["_commit"],
                "other": total - spent["write"] - spent["run_shard_transaction"],
            }
            if batch_id == 0:
                first = timing
            else:
                per_batch.append(timing)
    finally:
        pool.reset()
        delete_topics(bootstrap, [output, markers])
    publish = [t["produce"] + t["kafka_commit"] for t in per_batch]
    return {
        "rows": rows,
        "shards": shards,
        "batches": len(per_batch),
        "commit_ms": distribution([t["commit"] for t in per_batch], 1000),
        "steps_ms_p50": {step: distribution([t[step] for t in per_batch], 1000)["p50"]
                         for step in ("log_write", "produce", "kafka_commit", "other")},
        "phase2_records_per_s_p50": distribution([rows / p for p in publish if p > 0])["p50"],
        "first_batch_ms": {step: round(value * 1000, 1) for step, value in (first or {}).items()},
    }
