"""bench-results.md (the tables) and the PNG plots (matplotlib, from the `bench` extra)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .stats import CONTENDERS, ratio


def _cell(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) if not isinstance(c, str) else c for c in row) + " |" for row in rows]
    return lines


def contender_table(results: dict[str, Any]) -> list[str]:
    contenders = results["contenders"]
    eos_eps = ((contenders.get("eos") or {}).get("throughput") or {}).get("eps")
    rows = []
    for name in CONTENDERS:
        c = contenders.get(name)
        if c is None:
            continue
        eps = (c.get("throughput") or {}).get("eps")
        latency = (c.get("latency") or {}).get("ms") or {}
        memory = c.get("peak_memory_mb") or {}
        rows.append([
            f"{name}: {c['label']}" + (f" **failed: {c['error']}**" if c.get("error") else ""),
            eps, " / ".join(_cell(r["eps"], 0) for r in (c.get("throughput") or {}).get("runs") or []),
            _cell(ratio(eps, eos_eps), 2), latency.get("p50"), latency.get("p99"), latency.get("count"),
            c.get("startup_s"),
            memory.get("driver_total"), memory.get("python_workers"), (c.get("recovery") or {}).get("seconds"),
            c.get("verified"),
        ])
    return _table(["contender", "events/s (backlog, median)", "each round", "× eos", "latency p50 ms", "latency p99 ms",
                   "output records timed", "start-up s", "peak driver MB (python+JVM)", "python workers MB",
                   "recovery s", "counts exact"], rows)


def eos_profile(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for name in ("eos", "alos", "spark_kafka_job", "spark_kafka"):
        profile = ((results["contenders"].get(name) or {}).get("profile") or {}).get("spark_progress")
        if not profile:
            continue
        lines += ["", f"Spark progress of `{name}`: {profile['batches']} batches with input, "
                      f"p50 {_cell(profile['rows_per_batch_p50'], 0)} rows each", ""]
        lines += _table(["phase (durationMs)", "total ms", "share of triggerExecution", "p50 ms per batch"],
                        [[phase, v["total_ms"], _cell(v["share"], 3), v["p50_ms"]]
                         for phase, v in profile["phases"].items()])
    sink = ((results["contenders"].get("eos") or {}).get("profile") or {}).get("sink_log")
    if sink:
        lines += ["", f"Sink log of `eos` ({sink['batches']} batches, p50 {_cell(sink['records_per_batch_p50'], 0)} "
                      "records): phase 2 = committed_at − prepared_at (log writes, produce, Kafka commit)", ""]
        lines += _table(["figure", "p50", "p99", "max"], [
            ["phase 2 ms", sink["phase2_ms"]["p50"], sink["phase2_ms"]["p99"], sink["phase2_ms"]["max"]],
            ["phase 2 records/s", sink["phase2_records_per_s_p50"], None, None],
        ])
    return lines


def commit_table(results: dict[str, Any]) -> list[str]:
    micro = results.get("commit_microbench") or {}
    runs = micro.get("runs") or []
    if not runs:
        return [f"commit microbenchmark: {micro.get('error', 'not run')}"]
    rows = []
    for run in runs:
        steps = run["steps_ms_p50"]
        rows.append([run["rows"], run["shards"], run["batches"], run["commit_ms"]["p50"], run["commit_ms"]["p99"],
                     steps["log_write"], steps["produce"], steps["kafka_commit"],
                     steps["other"], run["phase2_records_per_s_p50"]])
    return _table(["rows", "shards", "batches", "commit p50 ms", "commit p99 ms", "log writes",
                   "produce+flush", "Kafka commit", "other", "phase-2 records/s"], rows)


def scaling_table(results: dict[str, Any]) -> list[str]:
    runs = results.get("scaling") or []
    if not runs:
        return []
    eps = {(r["dimension"], r["value"], r["contender"]): r.get("eps") for r in runs}
    smallest = {d: min(r["value"] for r in runs if r["dimension"] == d) for d in {r["dimension"] for r in runs}}

    def ratio(numerator: float | None, denominator: float | None) -> float | None:
        return round(numerator / denominator, 3) if numerator and denominator else None

    rows = [[r["dimension"], r["value"], r["contender"], r.get("eps"), _rounds(r.get("eps_rounds")),
             _cell(ratio(r.get("eps"), eps.get((r["dimension"], r["value"], "spark_kafka_job"))), 2),
             _cell(ratio(r.get("eps"), eps.get((r["dimension"], r["value"], "spark_kafka"))), 2),
             _cell(ratio(r.get("eps"), eps.get((r["dimension"], smallest[r["dimension"]], r["contender"]))), 2),
             r.get("driver_cpu_s_per_million_records"), _stages(r.get("sink_stages")),
             *_memory(r.get("peak_memory_mb")), r.get("verified"), r.get("error") or ""]
            for r in runs]
    return ["", "## Scaling (throughput draining the backlog)", "",
            "events/s: the median of the rounds (each round: every other one in reverse order). "
            "× spark_kafka_job: against the job's query on Spark's built-in sink at the same value; "
            "× spark_kafka: against the minimal built-in pipeline; × smallest: against the same contender "
            "at the dimension's smallest value.", "",
            *_table(["dimension", "value", "contender", "events/s", "each round", "× spark_kafka_job",
                     "× spark_kafka", "× smallest",
                     "driver CPU s per M output records", "sink ms p50: phase 1 / phase 2 (where)",
                     "peak driver MB (python+JVM)", "python workers MB", "counts exact", "error"], rows)]


def _rounds(eps: list[float | None] | None) -> str:
    """Each round's events/s, e.g. "41,428 / 39,300"; empty for one round."""
    if not eps or len(eps) < 2:
        return ""
    return " / ".join("–" if e is None else f"{e:,.0f}" for e in eps)


def _stages(stages: dict[str, dict[str, float]] | None) -> str:
    """The sink's stages per place phase 2 ran, e.g. "3,100 / 1,200 (tasks, 2 batches)"."""
    return "; ".join(f"{s['phase1_ms_p50']:,.0f} / {s['phase2_ms_p50']:,.0f} "
                     f"({place}, {s['batches']} batches)" for place, s in sorted((stages or {}).items()))


def _memory(peak: dict[str, float] | None) -> list[float | None]:
    peak = peak or {}
    return [peak.get("driver_total"), peak.get("python_workers")]


def caught_up_table(results: dict[str, Any]) -> list[str]:
    """Caught up at a steady rate with the production trigger: latency and batch times."""
    caught_up = results.get("caught_up") or {}
    names = [n for n in CONTENDERS if n in caught_up]
    if not names:
        return []
    lines = [f"## Caught up: {caught_up['rate_eps']:g} events/s, trigger {caught_up['trigger_s']:g}s", "",
             "| contender | latency p50 ms | latency p99 ms | batch p50 ms | batch max ms "
             "| batches > trigger + 1.5 s |",
             "|---|---|---|---|---|---|"]
    for name in names:
        row = caught_up[name] or {}
        latency = row.get("latency") or {}
        batches = latency.get("batches") or {}
        if row.get("error"):
            lines.append(f"| {name} | error: {row['error']} | | | | |")
            continue
        ms, batch_ms = latency.get("ms") or {}, batches.get("ms") or {}
        figures = [ms.get("p50"), ms.get("p99"), batch_ms.get("p50"), batch_ms.get("max")]
        shown = " | ".join("–" if value is None else f"{value:,.0f}" for value in figures)
        late = (f"{batches['over_trigger_plus_1500ms']} of {batches['count']}" if batches
                else "– (no batches: it commits at each checkpoint)")
        lines.append(f"| {name} | {shown} | {late} |")
    return [*lines, ""]


def _in_rounds(rounds: int) -> str:
    return f" in each of {rounds} rounds (percentiles over all)" if rounds > 1 else ""


def _values(profile: dict[str, Any]) -> str:
    """The values' format, where it is not JSON."""
    if profile.get("value_format", "json") == "json":
        return ""
    return f", {profile['value_format'].capitalize()} values in and out under a schema registry (its wire format)"


def markdown(results: dict[str, Any]) -> str:
    profile = results["profile"]
    env = results["environment"]
    lines = [
        "# Benchmark: the cost of exactly-once", "",
        f"{profile['events']:,} events backlog over {profile['partitions']} partitions, {profile['keys']:,} keys"
        f"{_values(profile)}; latency at {profile['rate']:g} events/s for {profile['latency_seconds']:g}s"
        f"{_in_rounds(profile.get('latency_rounds', 1))}; trigger "
        f"{profile['trigger_seconds']:g}s, at most {profile['max_per_batch']:,} records per batch; "
        f"{env.get('cpus')} CPUs, load average {env.get('loadavg_before')} → {env.get('loadavg_after')}; "
        f"Spark {env.get('pyspark')}, built-in connector {env.get('spark_kafka_connector') or '–'}. "
        "Ratios are the figures to compare: every contender ran in this one run on the same input.", "",
        *contender_table(results), "",
        "Latency of an output record: visible to a read_committed consumer − produce time of the event that made "
        "its count true (the count-th event of that key). Throughput: backlog events / (output complete − backlog "
        "visible), the backlog being produced in one transaction.", "",
        *caught_up_table(results),
        "## Phase 2 alone (coordinator.commit_batch microbenchmark)", "", *commit_table(results),
        "", "## Where the time goes", *eos_profile(results), *scaling_table(results), "",
        f"`{results['summary_line']}`", "",
    ]
    return "\n".join(lines)


def plots(results: dict[str, Any], out: Path) -> list[str]:
    """Write the PNGs; the names written (none when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    contenders = {n: c for n, c in results["contenders"].items() if c}
    written = []
    names = [n for n in CONTENDERS if n in contenders]

    figure, axis = plt.subplots(figsize=(7, 3.5))
    axis.bar(names, [((contenders[n].get("throughput") or {}).get("eps") or 0) for n in names], color="#4c72b0")
    axis.set_ylabel("events/s draining the backlog")
    axis.set_title("Throughput")
    figure.tight_layout()
    figure.savefig(out / "throughput.png", dpi=110)
    written.append("throughput.png")

    figure, axis = plt.subplots(figsize=(7, 3.5))
    for name in names:
        cdf = (contenders[name].get("latency") or {}).get("cdf_ms") or []
        if cdf:
            axis.plot(cdf, [i / max(1, len(cdf) - 1) for i in range(len(cdf))], label=name)
    axis.set_xscale("log")
    axis.set_xlabel("end-to-end latency, ms (log)")
    axis.set_ylabel("share of output records")
    axis.set_title(f"Latency CDF at {results['profile']['rate']:g} events/s")
    axis.legend()
    figure.tight_layout()
    figure.savefig(out / "latency.png", dpi=110)
    written.append("latency.png")

    phases = ((contenders.get("eos") or {}).get("profile") or {}).get("spark_progress")
    if phases:
        figure, axis = plt.subplots(figsize=(7, 3.5))
        shown = {k: v["total_ms"] for k, v in phases["phases"].items() if k != "triggerExecution"}
        axis.barh(list(shown), list(shown.values()), color="#55a868")
        axis.set_xlabel("ms, summed over batches with input")
        axis.set_title("eos: Spark batch phases")
        figure.tight_layout()
        figure.savefig(out / "eos-phases.png", dpi=110)
        written.append("eos-phases.png")
    for stem, dimension in SCALING_AXES.items():
        scaling = [r for r in results.get("scaling") or [] if r["dimension"] == dimension]
        if scaling:
            written.append(_scaling_plot(plt, scaling, dimension, out / f"scaling-{stem.replace('_', '-')}.png"))
    plt.close("all")
    return written


# The scaling dimensions plotted (--scaling-dimensions name: the axis), each into scaling-<name>.png.
SCALING_AXES = {"keys": "keys per batch", "partitions": "input partitions", "record_bytes": "record bytes"}


def _scaling_plot(plt: Any, scaling: list[dict[str, Any]], dimension: str, path: Path) -> str:
    """Events/s and peak memory (driver Python + JVM, and the Python workers) of each contender
    against one dimension, side by side, both axes logarithmic; returns the file's name."""
    figure, (speed, memory) = plt.subplots(1, 2, figsize=(11, 3.8))
    for name in [n for n in CONTENDERS if any(r["contender"] == n for r in scaling)]:
        mine = sorted((r for r in scaling if r["contender"] == name), key=lambda r: r["value"])
        if points := [(r["value"], r["eps"]) for r in mine if r.get("eps")]:
            speed.plot(*zip(*points, strict=True), marker="o", label=name)
        if points := [(r["value"], sum(v or 0 for v in _memory(r.get("peak_memory_mb"))))
                      for r in mine if r.get("peak_memory_mb")]:
            memory.plot(*zip(*points, strict=True), marker="o", label=name)
    for axis, label in ((speed, "events/s draining the backlog"), (memory, "peak resident MB, all its processes")):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel(f"{dimension} (log)")
        axis.set_ylabel(f"{label} (log)")
        axis.legend(fontsize="small")
    speed.set_title(f"Throughput against {dimension}")
    memory.set_title(f"Memory against {dimension}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path.name


def write_results(out: Path, stem: str, results: dict[str, Any], table: str, plots_written: list[str],
                  command: str, suffix: str = "") -> None:
    """A benchmark's results into `out` (<stem>.json, <stem>.md), its table printed, then what was written."""
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    (out / f"{stem}.md").write_text(table)
    print()
    print(table)
    print(f"{command}: wrote {out / f'{stem}.json'}, {out / f'{stem}.md'}"
          + (f", {', '.join(plots_written)}" if plots_written else " (no plots: matplotlib is not installed)") + suffix)
