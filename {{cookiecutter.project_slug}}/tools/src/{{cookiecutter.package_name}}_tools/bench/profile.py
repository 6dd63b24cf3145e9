"""Where a Spark contender's batch time goes: Spark's progress JSON (durationMs per phase of
each batch that had input) and, for this job's exactly-once sink, the sink log entries
`sinks/<sink_id>/log/N.json` with the times they were prepared and committed."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path
from typing import Any

from .stats import distribution

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
    """Per committed batch with records: phase 2's Kafka part = committed_at − prepared_at
    (the prepared log entry written, producing, the Kafka commit, the committed entry)."""
    base = checkpoint / "sinks" / sink_id
    entries = []
    for path in sorted((base / "log").glob("*.json"), key=lambda p: int(p.stem)):
        entry = json.loads(path.read_text())
        if entry.get("status") != "committed" or not entry.get("records") or entry.get("prepared_at") is None:
            continue
        entries.append({"batch_id": entry["batch_id"], "records": entry["records"],
                        "phase2_s": entry["committed_at"] - entry["prepared_at"]})
    if not entries:
        return None
    return {
        "batches": len(entries),
        "records_per_batch_p50": distribution([e["records"] for e in entries])["p50"],
        "phase2_ms": distribution([e["phase2_s"] for e in entries], 1000),
        "phase2_records_per_s_p50": distribution([e["records"] / e["phase2_s"] for e in entries
                                                  if e["phase2_s"] > 0])["p50"],
    }


_BATCH_LINE = re.compile(r"batch (\d+): (\d+) records in \d+ ms.*, published from (\w+) \("
                         r"phase 1 (\d+) ms, phase 2 (\d+) ms\)")


def sink_stages_profile(log_text: str) -> dict[str, Any] | None:
    """Per place phase 2 ran (driver, tasks), from the job's batch lines: the batches and the p50
    of the sink's stages (phase 1, phase 2), in ms."""
    places: dict[str, list[tuple[int, int]]] = {}
    for match in _BATCH_LINE.finditer(log_text):
        place, stages = match.group(3), tuple(int(match.group(i)) for i in (4, 5))
        places.setdefault(place, []).append(stages)  # type: ignore[arg-type]
    if not places:
        return None
    return {place: {"batches": len(rows), **{f"{stage}_ms_p50": statistics.median(row[i] for row in rows)
                                             for i, stage in enumerate(("phase1", "phase2"))}}
            for place, rows in places.items()}
