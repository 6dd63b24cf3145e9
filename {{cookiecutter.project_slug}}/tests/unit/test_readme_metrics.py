"""docs/operations.md's table of the sink's metrics is held to the registry the job serves: every series
has its row, with its type and its labels past `sink_id`, and every row names a series. A metric
added, renamed or given another label without its row fails here."""

from __future__ import annotations

import re
from pathlib import Path

from {{ cookiecutter.package_name }}.observability import metrics

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
HEADER = "| metric | type | what |\n| --- | --- | --- |\n"


def rows() -> dict[str, tuple[str, frozenset[str]]]:
    """Per row: the exposed name (with a counter's `_total`), the type, the labels the row shows."""
    lines = OPERATIONS.read_text().split(HEADER, 1)[1].split("\n\n", 1)[0].splitlines()
    table = {}
    for line in lines:
        metric, kind, _what = line.strip().strip("|").split(" | ", 2)
        found = re.fullmatch(r"`(\w+)(?:\{([\w,]+)\})?`", metric.strip())
        assert found, f"a row of the metrics table does not start with a metric: {line}"
        name, labels = found.group(1), found.group(2)
        table[name] = (kind.strip(), frozenset(labels.split(",")) if labels else frozenset())
    return table


def served() -> dict[str, tuple[str, frozenset[str]]]:
    """Per series of the job's registry: the name Prometheus scrapes, its type, its labels past sink_id."""
    series = {}
    for name, value in vars(metrics).items():
        if isinstance(value, metrics.Counter | metrics.Gauge | metrics.Histogram) and name.isupper():
            kind = type(value).__name__.lower()
            exposed = value._name + ("_total" if isinstance(value, metrics.Counter) else "")  # the client adds _total
            labels = tuple(value._labelnames)  # the client keeps no public accessor for them
            assert labels[0] == "sink_id", f"{name} is not labelled with the sink id first"
            series[exposed] = (kind, frozenset(labels[1:]))
    return series


def test_every_series_the_job_serves_has_its_row_and_every_row_a_series() -> None:
    table, code = rows(), served()
    assert code, "no series found in observability/metrics.py"
    assert sorted(set(code) - set(table)) == [], "series without a row in docs/operations.md's metrics table"
    assert sorted(set(table) - set(code)) == [], "rows of docs/operations.md's metrics table that name no series"
    differing = {name: (table[name], code[name]) for name in code if table[name] != code[name]}
    assert not differing, f"rows whose type or labels are not the code's (docs, code): {differing}"
