"""The savepoint commands (`savepoint create|inspect`, `state`, `run --from-savepoint`): what
they read from Kafka and the checkpoint, and what they print. The savepoint itself is
the rest of savepoints/. Nothing heavy is imported until a command runs."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import savepoints
from ..config import JobConfig
from ..failures import ConfigError
from ..storage import driver_presence
from ..storage.files import resolve_location
from . import effective_config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The job's Spark session for a configuration, named (the caller's: job.spark_session).
SessionFactory = Callable[..., "SparkSession"]

log = logging.getLogger(__name__)

__all__ = ["create", "effective_config", "inspect", "restore_plan", "show_state"]


def _markers(config: JobConfig, sink_id: str, settled: bool = True) -> dict[int, int]:
    from ..sink import published_batches

    return published_batches(config, sink_id, settled)


def _fence_old_producers(config: JobConfig) -> None:
    from ..sink import fence_stopped_job, settings_for

    if config.exactly_once:
        fence_stopped_job(settings_for(config))


def _session(spark_session: SessionFactory, config: JobConfig, name: str) -> SparkSession:
    """The job's own session (its master, its S3 settings for a checkpoint on S3), without a UI."""
    return spark_session(dataclasses.replace(config, ui_port=0), app_name=name)


def require_answer(config: JobConfig, command: str) -> None:
    """A savepoint carries, and `state` shows, each key's answer as its state keeps it: refused,
    in one line, for a query that keeps none or whose answer's state cannot be kept
    (pipeline/aggregates.py). The CLI asks first, before any storage or broker."""
{%- if cookiecutter.query == "count-by-key" %}
    from ..pipeline.steps import checked_answer

    checked_answer(config)
{%- else %}
    raise savepoints.SavepointError("savepoint", f"`{command}` moves and shows an answer per key, and this query "
                                    "keeps {{ 'windows' if cookiecutter.query == 'windowed-count' else 'no state' }}: "
                                    "start a changed job on a new checkpoint_location with a new sink_id")
{%- endif %}


def create(config: JobConfig, to: str, timeout: float, spark_session: SessionFactory) -> int:
    """Stop the job at a batch boundary if it runs on the checkpoint, then save it."""
    from ..kafka.client import cluster_topics

    cluster_topics(config.bootstrap_servers, config.kafka)  # before stopping the job: Kafka must answer to save it
    location = resolve_location(config.checkpoint_location)
    effective = effective_config(config)
    if driver_presence.running_driver(location) is not None:
        driver_presence.request_stop(location, f"savepoint to {resolve_location(to)}")
        try:
            driver_presence.wait_until_stopped(location, timeout, log.info)
        finally:
            driver_presence.clear_stop_request(location)
        log.info("the job stopped")
    _fence_old_producers(effective)
    markers = _markers(effective, effective.sink_id)
    spark = _session(spark_session, config, "savepoint-create")
    try:
        manifest = savepoints.create(spark, config, effective, to, markers)
    finally:
        spark.stop()
    print(f"savepoint {resolve_location(to)}: batch {manifest.batch_id}, {manifest.keys} keys ({manifest.state}), "
          f"offsets {json.dumps(manifest.source_offsets)}, sink {manifest.sink_id!r} "
          f"(generation {manifest.generation}) published {manifest.published}")
    print(f"resume with: run --from-savepoint {resolve_location(to)} --set checkpoint_location=<a new path>")
    return 0


def restore_plan(config: JobConfig, path: str | None) -> Callable[[Any], None] | None:
    """For `run --from-savepoint`: check the savepoint against the job and Kafka now, before
    Spark starts, and return what prepares the new checkpoint once Spark runs (None: nothing
    to do, a plain run or the resumption of a checkpoint already started from `path`)."""
    origin = savepoints.read_origin(config)
    if origin is not None:
        if path is not None and resolve_location(path) != origin.savepoint:
            raise ConfigError("--from-savepoint", f"{resolve_location(config.checkpoint_location)} was started from "
                              f"{origin.savepoint}, not from {resolve_location(path)}")
        return None  # resuming: the checkpoint knows where it came from
    if path is None:
        return None
    require_answer(config, "run --from-savepoint")
    manifest = savepoints.read_manifest(path)
    next_sink = savepoints.generation_sink_id(config.sink_id, manifest.generation + 1)
    savepoints.check_restorable(manifest, config, resolve_location(path),
                                markers_then=_markers(config, manifest.sink_id, settled=False),
                                markers_next=_markers(config, next_sink, settled=False))

    def prepare(spark) -> None:
        origin = savepoints.start_from(spark, config, path, manifest)
        log.info("new checkpoint %s from savepoint %s (batch %d, %d keys): sink %r, source from %s",
                 resolve_location(config.checkpoint_location), origin.savepoint, manifest.batch_id, manifest.keys,
                 origin.sink_id, origin.starting_offsets)

    return prepare


def _answers(rows: list[dict[str, Any]], config: JobConfig) -> list[dict[str, Any]]:
    """Each key's published answer from its state row (pipeline/aggregates.py), its expiry kept."""
{%- if cookiecutter.query != "count-by-key" %}
    return rows  # this query keeps no answer per key (require_answer refuses it first)
{%- else %}
    from ..pipeline.steps import checked_answer

    answer = checked_answer(config)
    return [{"key": row["key"], **answer.published(row), "expires_at_ms": row.get("expires_at_ms")} for row in rows]
{%- endif %}


def inspect(config: JobConfig, path: str, as_json: bool, limit: int) -> int:
    """The savepoint at `path`: its manifest and its first keys (in key order), as query.py's answer
    publishes them."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from ..storage.files import filesystem

    manifest = savepoints.read_manifest(path)
    fs, base = filesystem(path)
    table = ds.dataset([f"{base}/{f['path']}" for f in manifest.files], filesystem=fs, format="parquet").to_table()
    rows = [] if table.num_rows == 0 or limit <= 0 else table.take(
        pc.sort_indices(table, sort_keys=[("key", "ascending")])[:limit]).to_pylist()
    shown = _answers(rows, config) if manifest.state == savepoints.declared_state(config) else rows
    document = {**json.loads(manifest.to_json()), "path": resolve_location(path), "first_keys": shown}
    if as_json:
        print(json.dumps(document, indent=1))
        return 0
    print(f"savepoint {document['path']} (format {manifest.format_version})")
    print(f"  taken at batch {manifest.batch_id}, sink {manifest.sink_id!r} (generation {manifest.generation})")
    print(f"  source offsets  {json.dumps(manifest.source_offsets)}")
    print("  last published  " + ", ".join(f"shard {s}: batch {b}" for s, b in manifest.published.items()))
    ttl = manifest.config.get("state_ttl_seconds", 0)
    print(f"  keys {manifest.keys}, each kept as ({manifest.state}); state TTL: "
          + (f"{ttl} s (a key's state expires at the time shown)" if ttl else "none"))
    print("  config  " + ", ".join(f"{name}={value!r}" for name, value in manifest.config.items()))
    _print_answers(shown, manifest.keys)
    return 0


def _print_answers(shown: list[dict[str, Any]], keys: int) -> None:
    """A table: key, the answer's fields, and the expiry where a state TTL set one."""
    if not shown:
        return
    with_ttl = any(row.get("expires_at_ms") is not None for row in shown)
    names = [name for name in shown[0] if name != "expires_at_ms"]
    cells = [[_cell(row[name]) for name in names] + ([_utc(row["expires_at_ms"])] if with_ttl else []) for row in shown]
    heading = [*names, *(["expires (UTC)"] if with_ttl else [])]
    widths = [max(len(heading[i]), *(len(row[i]) for row in cells)) for i in range(len(heading))]
    shown_of = f"   ({len(shown)} of {keys}, in key order)" if keys > len(shown) else ""
    print("  " + "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(heading, widths,
                                                                                             strict=True))) + shown_of)
    for row in cells:
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths,
                                                                                                strict=True))))


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _utc(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "-"
    return datetime.fromtimestamp(epoch_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def show_state(config: JobConfig, as_json: bool, limit: int, spark_session: SessionFactory) -> int:
    """The checkpoint's state as of its last committed batch (the job may be running)."""
    from ..storage import checkpoint

    effective = effective_config(config)
    location = resolve_location(config.checkpoint_location)
    committed = checkpoint.committed_batches(location)
    if not committed:
        raise ConfigError("checkpoint_location", f"{location} has no committed batch: no state yet")
    batch = committed[-1]
    markers = {}
    if effective.exactly_once:
        from ..kafka.client import cluster_topics

        cluster_topics(config.bootstrap_servers, config.kafka)  # one line naming bootstrap_servers if unreachable
        markers = _markers(effective, effective.sink_id, settled=False)
    spark = _session(spark_session, config, "state")
    try:
        state = savepoints.read_state(spark, config, batch)
        keys = state.count()
        rows = [row.asDict() for row in state.orderBy("key").limit(max(limit, 0)).collect()]
    finally:
        spark.stop()
    shown = _answers(rows, config)
    document: dict[str, Any] = {
        "checkpoint": location, "batch_id": batch, "sink_id": effective.sink_id,
        "running": driver_presence.running_driver(location) is not None,
        "source_offsets": {config.input_topic: checkpoint.input_offsets(location, batch, config.input_topic)},
        "published": {str(shard): b for shard, b in sorted(markers.items())},
        "keys": keys, "ttl_seconds": config.state_ttl_seconds, "first_keys": shown,
    }
    if as_json:
        print(json.dumps(document, indent=1))
        return 0
    print(f"state of {location} after batch {batch} ({'running' if document['running'] else 'stopped'})")
    print(f"  source offsets  {json.dumps(document['source_offsets'])}")
    print("  last published  " + (", ".join(f"shard {s}: batch {b}" for s, b in document["published"].items())
                                   or "nothing yet") + f" (sink {effective.sink_id!r})")
    print(f"  keys {keys}" + (f", state TTL {config.state_ttl_seconds} s" if config.state_ttl_seconds else ""))
    _print_answers(shown, keys)
    return 0
