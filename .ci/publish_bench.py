"""Copy a benchmark run's results into .ci/bench-results/ and rewrite the measured section of
docs/performance.md from them, so that no figure there is typed by hand. `make bench-startup`'s
results, when the run directory has them (its startup/), are published beside.

    python .ci/publish_bench.py bench/color-counts/bench-out
"""

from __future__ import annotations

import json
import platform
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / ".ci" / "bench-results"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def machine() -> str:
    cpus = len([line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("processor")])
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    memory_kb = int(Path("/proc/meminfo").read_text().split()[1])
    return f"{cpus} CPUs ({model}), {memory_kb / 2**20:.0f} GiB, {platform.system()} {platform.release()}"


def main(run_dir: str) -> None:
    source = Path(run_dir)
    KEPT.mkdir(parents=True, exist_ok=True)
    for name in ("bench-results.md", "bench-results.json", "throughput.png", "latency.png", "eos-phases.png",
                 "scaling-keys.png"):
        if (source / name).exists():
            shutil.copy(source / name, KEPT / name)
    startup = source / "startup"
    for name in ("startup-results.md", "startup-results.json", "startup.png"):
        if (startup / name).exists():
            shutil.copy(startup / name, KEPT / name)
    table = (KEPT / "bench-results.md").read_text().split("\n", 1)[1].strip()  # without its own title
    summary = json.loads((KEPT / "bench-results.json").read_text()).get("summary_line", "")
    section = "\n".join([
        START,
        f"Measured on {machine()}, with `make bench` (the default profile"
        + (", with `--scaling`" if (source / "scaling-keys.png").exists() else "") + "). Raw results, plots and",
        "JSON are in `.ci/bench-results/`; this section is rewritten by `.ci/publish_bench.py`.",
        "",
        "![throughput](../.ci/bench-results/throughput.png)",
        *(["", "![scaling](../.ci/bench-results/scaling-keys.png)"] if (source / "scaling-keys.png").exists() else []),
        "",
        table.replace("\n# ", "\n### ").replace("\n## ", "\n### "),
        "",
        f"`{summary}`" if summary and summary not in table else "",  # the table may end with it already
        *_startup_section(startup),
        END,
    ])
    page = ROOT / "docs" / "performance.md"
    text = page.read_text()
    before, _, rest = text.partition(START)
    _, _, after = rest.partition(END)
    page.write_text(before + section + after)


def _startup_section(startup: Path) -> list[str]:
    if not (startup / "startup-results.md").exists():
        return []
    results = json.loads((startup / "startup-results.json").read_text())
    return ["", "### Start-up and recovery after SIGKILL", "",
            "Measured with `make bench-startup` (three rounds) on the same machine, in a run of its own.", "",
            "![start-up](../.ci/bench-results/startup.png)", "",
            (startup / "startup-results.md").read_text().strip(), "", f"`{results.get('summary_line', '')}`"]


if __name__ == "__main__":
    main(sys.argv[1])
