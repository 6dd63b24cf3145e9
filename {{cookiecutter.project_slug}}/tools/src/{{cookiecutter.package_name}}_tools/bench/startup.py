"""`bench-startup`: where a start of the job goes, and a restart after SIGKILL, next to Spark's
own pipeline (the spark_kafka contender, started the way a team starts it: spark.jars.packages,
Spark's defaults), in one run on one broker.

After one untimed start and stop of the job (measure.warm_job_start: as on any host where it
ran before), per round, spark_kafka starts once; eos starts once, then is SIGKILLed while events flow and
restarted on its checkpoint (measure.Run: start-up = process start to the first output visible to
a read_committed consumer; recovery = SIGKILL to the first output of a batch newer than any
before it). The order is reversed every other round; figures are medians. The job logs each
start's steps (startup/startup.py: python, checks, spark session, preflight, query start, first
batch), read back from its log here.

Writes startup-results.json, startup-results.md and startup.png into --out; the last line printed is
`bench-startup: eos_startup_s=... spark_kafka_startup_s=... startup_ratio=... recovery_s=... recovery_ratio=...`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path
from typing import Any

from .measure import Profile, Run, warm_job_start
from .report import write_results

STARTED = re.compile(r"started: first batch \d+ out ([\d.]+)s after the process began \((.*); first batch: (.*)\)")
PART = re.compile(r"([a-z][a-z0-9 ]*?) ([\d.]+)s")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="bench-out/startup", help="output directory (default: bench-out/startup)")
    parser.add_argument("--rounds", type=int, default=3, help="starts of each contender (default 3)")
    parser.add_argument("--seed", type=int, default=6, help="the same seed produces the same input")


def started_line(log_file: Path) -> dict[str, Any] | None:
    """The job's `started:` line in a contender's log: its total and its steps, in seconds."""
    if not log_file.exists():
        return None
    for line in log_file.read_text(errors="replace").splitlines():
        if found := STARTED.search(line):
            return {"seconds": float(found[1]),
                    "steps": {name: float(s) for name, s in PART.findall(found[2])},
                    "first_batch": {name: float(s) for name, s in PART.findall(found[3])}}
    return None


def _median_steps(lines: list[dict[str, Any]], key: str) -> dict[str, float]:
    names = list(dict.fromkeys(name for line in lines for name in line[key]))
    return {name: round(statistics.median(line[key].get(name, 0.0) for line in lines), 2) for name in names}


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def measure_rounds(bootstrap: str, rounds: int, workdir: Path, seed: int, log=print) -> dict[str, Any]:
    profile = Profile(events=0, warmup=2_000, latency_seconds=0, seed=seed)
    runs: dict[str, list[dict[str, Any]]] = {"eos": [], "spark_kafka": []}
    warm_job_start(bootstrap, workdir, log)
    for round_number in range(1, rounds + 1):
        order = ["spark_kafka", "eos"] if round_number % 2 else ["eos", "spark_kafka"]
        for name in order:
            log(f"bench-startup: round {round_number}/{rounds}: {name}")
            run = Run(name, bootstrap, profile, workdir)
            result = run.measure(latency=False, backlog=False, recovery=(name == "eos"), log=log)
            entry: dict[str, Any] = {"startup_s": result.get("startup_s"), "error": result.get("error")}
            if name == "eos":
                entry["recovery_s"] = (result.get("recovery") or {}).get("seconds")
                entry["start"] = started_line(run.workdir / "eos-1.log")
                entry["restart"] = started_line(run.workdir / "eos-2.log")
            runs[name].append(entry)
    return runs


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    eos, spark = runs["eos"], runs["spark_kafka"]
    eos_start = _median([r["startup_s"] for r in eos if r.get("startup_s") is not None])
    spark_start = _median([r["startup_s"] for r in spark if r.get("startup_s") is not None])
    recovery = _median([r["recovery_s"] for r in eos if r.get("recovery_s") is not None])
    starts = [r["start"] for r in eos if r.get("start")]
    restarts = [r["restart"] for r in eos if r.get("restart")]
    return {
        "eos_startup_s": eos_start, "spark_kafka_startup_s": spark_start, "recovery_s": recovery,
        "startup_ratio": round(eos_start / spark_start, 3) if eos_start and spark_start else None,
        "recovery_ratio": round(recovery / spark_start, 3) if recovery and spark_start else None,
        "start_steps": _median_steps(starts, "steps") if starts else {},
        "start_first_batch": _median_steps(starts, "first_batch") if starts else {},
        "restart_steps": _median_steps(restarts, "steps") if restarts else {},
        "restart_first_batch": _median_steps(restarts, "first_batch") if restarts else {},
    }


def markdown(results: dict[str, Any]) -> str:
    s = results["summary"]
    lines = [
        "| | seconds (median) | × spark_kafka start-up |", "| --- | --- | --- |",
        f"| spark_kafka start-up | {s['spark_kafka_startup_s']} | 1 |",
        f"| eos start-up | {s['eos_startup_s']} | {s['startup_ratio']} |",
        f"| eos recovery after SIGKILL | {s['recovery_s']} | {s['recovery_ratio']} |",
        "", "Where the job's own start goes (its `started:` log line, medians; the process's start to its "
        "first batch's output):", "", "| step | start | restart after SIGKILL |", "| --- | --- | --- |",
    ]
    for name in dict.fromkeys([*s["start_steps"], *s["restart_steps"]]):
        lines.append(f"| {name} | {s['start_steps'].get(name, '')} | {s['restart_steps'].get(name, '')} |")
    lines += ["", "Inside the first batch:", "", "| part | start | restart after SIGKILL |", "| --- | --- | --- |"]
    for name in dict.fromkeys([*s["start_first_batch"], *s["restart_first_batch"]]):
        lines.append(f"| {name} | {s['start_first_batch'].get(name, '')} | {s['restart_first_batch'].get(name, '')} |")
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], out: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    s = results["summary"]
    figure, axis = plt.subplots(figsize=(8, 3))
    bars = [("eos restart", s["restart_steps"]), ("eos start", s["start_steps"])]
    colours = plt.get_cmap("tab10")
    names = list(dict.fromkeys(name for _, steps in bars for name in steps))
    for row, (_, steps) in enumerate(bars):
        left = 0.0
        for name in names:
            width = steps.get(name, 0.0)
            axis.barh(row, width, left=left, color=colours(names.index(name)), label=name if row == 1 else None)
            left += width
    axis.barh(2, s["spark_kafka_startup_s"] or 0, color="#999999")
    axis.set_yticks([0, 1, 2], ["eos restart\n(job's steps)", "eos start\n(job's steps)", "spark_kafka start"])
    axis.set_xlabel("seconds")
    axis.legend(fontsize=7, ncol=3, loc="lower right")
    figure.tight_layout()
    figure.savefig(out / "startup.png", dpi=110)
    return "startup.png"


def run(args: argparse.Namespace) -> int:
    from ..kafka_local import provide_kafka

    if args.rounds < 1:
        raise SystemExit("bench-startup: --rounds must be at least 1")
    started = time.monotonic()
    out = Path(args.out).resolve()
    workdir = out / "runs"
    workdir.mkdir(parents=True, exist_ok=True)
    with provide_kafka(workdir) as kafka:
        print(kafka.describe(), flush=True)
        runs = measure_rounds(kafka.bootstrap_servers, args.rounds, workdir, args.seed,
                              log=lambda message: print(message, flush=True))
    results: dict[str, Any] = {"runs": runs, "summary": summarize(runs),
                               "duration_s": round(time.monotonic() - started, 1)}
    s = results["summary"]
    results["summary_line"] = (
        f"bench-startup: eos_startup_s={s['eos_startup_s']} spark_kafka_startup_s={s['spark_kafka_startup_s']} "
        f"startup_ratio={s['startup_ratio']} recovery_s={s['recovery_s']} recovery_ratio={s['recovery_ratio']}")
    written = plot(results, out)
    write_results(out, "startup-results", results, markdown(results), [written] if written else [], "bench-startup")
    failed = [f"{name} round {i}: {r['error']}" for name, rs in runs.items() for i, r in enumerate(rs, 1) if r["error"]]
    for failure in failed:
        print(f"bench-startup: failed: {failure}")
    print(results["summary_line"], flush=True)
    return 1 if failed else 0
