"""Where a Spark contender's batch time goes: Spark's progress JSON (durationMs per phase of
each batch that had input) and, for this job's exactly-once sink, the sink log entries
`sinks/<sink_id>/log/N.json` with the staged files' write times."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .stats import distribution

# Optional timing fields of a log entry (its staged files may carry `stage_seconds`).
TIMING_FIELDS = ("stage_seconds", "log_write_seconds", "publish_seconds", "commit_seconds")
PHASES = ("latestOffset", "queryPlanning", "getBatch", "addBatch", "walCommit", "commitOffsets", "triggerExecution")


def read_progress(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    batches = []
    for line in path.read_text().splitlines():
        try:
            progress = json.loads(line)
        except ValueError:
            continue
        if progress.get("numInputRows", 0) > 0:
            batches.append(progress)
    return batches


def progress_profile(batches: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per phase: total ms over the batches with input, share of triggerExecution, p50 per batch."""
    if not batches:
        return None
    total_trigger = sum(b.get("durationMs", {}).get("triggerExecution", 0) for b in batches) or 1
    phases = {}
    for phase in PHASES:
        values = [b.get("durationMs", {}).get(phase, 0) for b in batches]
        phases[phase] = {
            "total_ms": sum(values),
            "share": round(sum(values) / total_trigger, 3),
            "p50_ms": distribution(values)["p50"],
        }
    return {
        "batches": len(batches),
        "rows_per_batch_p50": distribution([b.get("numInputRows", 0) for b in batches])["p50"],
        "phases": phases,
    }


def sink_log_profile(checkpoint: Path, sink_id: str) -> dict[str, Any] | None:
    """Per committed batch with records: phase 2 ≈ committed_at − the last staged file's write
    (needs staged files kept: the benchmark sets staging_retention_batches high). That span
    holds Spark handing the commit to the driver, both log writes, producing and the commit."""
    base = checkpoint / "sinks" / sink_id
    entries = []
    for path in sorted((base / "log").glob("*.json"), key=lambda p: int(p.stem)):
        entry = json.loads(path.read_text())
        if entry.get("status") != "committed" or not entry.get("records"):
            continue
        staged_times = [(checkpoint / s["path"]).stat().st_mtime for s in entry["staged"]
                        if (checkpoint / s["path"]).exists()]
        if not staged_times or entry.get("committed_at") is None:
            continue
        phase2 = entry["committed_at"] - max(staged_times)
        stage_spread = max(staged_times) - min(staged_times)
        entries.append({"batch_id": entry["batch_id"], "records": entry["records"], "phase2_s": phase2,
                        "staged_files": len(staged_times), "stage_spread_s": stage_spread,
                        **_timings(entry)})
    if not entries:
        return None
    timings = {f"{name}_ms": distribution([e[name] for e in entries if name in e], 1000)
               for name in TIMING_FIELDS if any(name in e for e in entries)}
    return {
        **timings,
        "batches": len(entries),
        "records_per_batch_p50": distribution([e["records"] for e in entries])["p50"],
        "phase2_ms": distribution([e["phase2_s"] for e in entries], 1000),
        "phase2_records_per_s_p50": distribution([e["records"] / e["phase2_s"] for e in entries
                                                  if e["phase2_s"] > 0])["p50"],
        "staging_spread_ms": distribution([e["stage_spread_s"] for e in entries], 1000),
    }


def _seconds(value: Any) -> float:
    """A timing field: seconds, or {shard: seconds} summed (shards commit one after another)."""
    return float(sum(value.values())) if isinstance(value, dict) else float(value)


def _timings(entry: dict[str, Any]) -> dict[str, float]:
    """The timing fields an entry has: `stage_seconds` is the slowest task's."""
    found = {name: _seconds(entry[name]) for name in TIMING_FIELDS if entry.get(name) is not None}
    staged = [s["stage_seconds"] for s in entry.get("staged", []) if s.get("stage_seconds") is not None]
    if staged:
        found["stage_seconds"] = max(staged)
    return found
