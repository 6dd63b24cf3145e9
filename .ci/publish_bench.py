"""Copy a benchmark run's results into .ci/bench-results/ and rewrite the measured section of
docs/performance.md from them, so that no figure there is typed by hand. `make bench-startup`'s
results, when the run directory has them (its startup/), are published beside. A run of another
query shape than the default (`make bench QUERY=stateless`), or with Avro values (`make bench
FORMAT=avro`), has a section and a results folder of its own (`.ci/bench-results/<shape>/`,
`.ci/bench-results/<shape>-avro/`). A run with `--scaling` publishes its scaling plots and table
alone, into the section "How cost grows" and `.ci/bench-results/scaling/`: its backlog rounds are
the default run's to publish.

    python .ci/publish_bench.py bench/color-counts/bench-out [<query shape> [<format> [<BENCH_ARGS>]]]
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


DEFAULT_QUERY = "count-by-key"


def main(run_dir: str, query: str = DEFAULT_QUERY, value_format: str = "json", bench_args: str = "") -> None:
    source = Path(run_dir)
    if "--scaling" in bench_args.split():
        scaling_main(source, query, value_format, bench_args)
        return
    default = query == DEFAULT_QUERY and value_format == "json"
    name = query if value_format == "json" else f"{query}-{value_format}"  # the run's section and folder
    kept = KEPT if default else KEPT / name
    start, end = (START, END) if default else (f"<!-- bench-{name}:start -->", f"<!-- bench-{name}:end -->")
    images = "../.ci/bench-results" + ("" if default else f"/{name}")
    command = f"`{make_bench(query, value_format, bench_args)}`"
    kept.mkdir(parents=True, exist_ok=True)
    for name in ("bench-results.md", "bench-results.json", "throughput.png", "latency.png", "eos-phases.png"):
        if (source / name).exists():
            shutil.copy(source / name, kept / name)
    startup = source / "startup"
    for name in ("startup-results.md", "startup-results.json", "startup.png"):
        if (startup / name).exists():
            shutil.copy(startup / name, kept / name)
    table = (kept / "bench-results.md").read_text().split("\n", 1)[1].strip()  # without its own title
    summary = json.loads((kept / "bench-results.json").read_text()).get("summary_line", "")
    section = "\n".join([
        start,
        f"Measured on {machine()}, with {command}" + ("" if bench_args.strip() else " (the default profile)")
        + ". Raw results, plots and",
        f"JSON are in `{images.removeprefix('../')}/`; this section is rewritten by `.ci/publish_bench.py`.",
        "",
        f"![throughput]({images}/throughput.png)",
        "",
        table.replace("\n# ", "\n### ").replace("\n## ", "\n### "),
        "",
        f"`{summary}`" if summary and summary not in table else "",  # the table may end with it already
        *_startup_section(startup),
        end,
    ])
    # A shape's (or a format's) first run: its section goes last, under this title.
    title = f"The {query} query" + ("" if value_format == "json" else f", {value_format.capitalize()} values")
    rewrite_section(start, end, section, title)


def make_bench(query: str, value_format: str, bench_args: str) -> str:
    """The root Makefile's command that makes such a run."""
    arguments = ([] if query == DEFAULT_QUERY else [f"QUERY={query}"]) + ([] if value_format == "json"
                                                                          else [f"FORMAT={value_format}"])
    if bench_args.strip():
        arguments.append(f'BENCH_ARGS="{" ".join(bench_args.split())}"')
    return " ".join(["make bench", *arguments])


def rewrite_section(start: str, end: str, section: str, title: str) -> None:
    """docs/performance.md with `section` between its `start` and `end` markers; a page without
    them gets them last, under `## title`."""
    page = ROOT / "docs" / "performance.md"
    text = page.read_text()
    if start not in text:
        text = f"{text.rstrip()}\n\n## {title}\n\n{start}\n{end}\n"
    before, _, rest = text.partition(start)
    _, _, after = rest.partition(end)
    page.write_text(before + section + after)


SCALING_START, SCALING_END = "<!-- bench-scaling:start -->", "<!-- bench-scaling:end -->"


def scaling_main(source: Path, query: str, value_format: str, bench_args: str) -> None:
    """A `--scaling` run's plots and its scaling table, into the section between SCALING_START and
    SCALING_END (made last if the page has none)."""
    kept = KEPT / "scaling"
    kept.mkdir(parents=True, exist_ok=True)
    plots = sorted(plot.name for plot in source.glob("scaling-*.png"))
    if not plots:
        raise SystemExit(f"publish_bench: {source} holds no scaling-*.png: was the run made with --scaling?")
    for name in ("bench-results.md", "bench-results.json", *plots):
        shutil.copy(source / name, kept / name)
    table = (kept / "bench-results.md").read_text()
    scaling = table[table.index("## Scaling"):].split("\n## ", 1)[0].split("\n", 1)[1].strip()
    command = make_bench(query, value_format, bench_args)
    section = "\n".join([
        SCALING_START,
        f"Measured on {machine()}, with `{command}`. Raw results and JSON are in",
        "`.ci/bench-results/scaling/`; this section is rewritten by `.ci/publish_bench.py`.",
        *(line for plot in plots
          for line in ("", f"![{plot.removesuffix('.png')}](../.ci/bench-results/scaling/{plot})")),
        "", scaling, SCALING_END,
    ])
    rewrite_section(SCALING_START, SCALING_END, section, "How cost grows")


def _startup_section(startup: Path) -> list[str]:
    if not (startup / "startup-results.md").exists():
        return []
    results = json.loads((startup / "startup-results.json").read_text())
    return ["", "### Start-up and recovery after SIGKILL", "",
            "Measured with `make bench-startup` (three rounds) on the same machine, in a run of its own.", "",
            "![start-up](../.ci/bench-results/startup.png)", "",
            (startup / "startup-results.md").read_text().strip(), "", f"`{results.get('summary_line', '')}`"]


if __name__ == "__main__":
    main(*sys.argv[1:5])
