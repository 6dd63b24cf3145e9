"""The default rendering: the right files, no template markers left, lint clean; no test of any
shape's rendering that ends before its end."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import has_template_markers, render

EXPECTED_FILES = {
    "README.md",
    "Makefile",
    "pyproject.toml",
    "src/color_counts/__init__.py",
    "src/color_counts/cli.py",
    "tools/src/color_counts_tools/kafka_local/__init__.py",
    "tools/src/color_counts_tools/kafka_local/process.py",
    "tools/src/color_counts_tools/kafka_local/pom.xml",
    "tests/conftest.py",
    "tests/integration/test_broker_transactions.py",
}


def rendered_files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


def test_default_rendering_has_the_expected_layout(rendered_default: Path) -> None:
    assert rendered_default.name == "color-counts"
    missing = EXPECTED_FILES - rendered_files(rendered_default)
    assert not missing, f"missing from the rendered project: {sorted(missing)}"


def test_no_template_markers_are_left(rendered_default: Path) -> None:
    leftovers = [str(path.relative_to(rendered_default)) for path in rendered_default.rglob("*")
                 if path.is_file() and has_template_markers(path.relative_to(rendered_default).as_posix(),
                                                            path.read_text(errors="replace"))]
    assert not leftovers, f"template markers left in: {leftovers}"


def test_rendered_project_type_checks(rendered_default: Path, project_python: Path) -> None:
    """mypy on the job's package, strict on its sink, as the rendered `make lint` runs it."""
    result = subprocess.run([str(project_python), "-m", "mypy"], cwd=rendered_default, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_project_is_ruff_clean(rendered_default: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "."], cwd=rendered_default, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def own_statements(node: ast.AST) -> Iterator[ast.AST]:
    """The statements and expressions of a function, not those of the functions defined in it."""
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            yield child
            yield from own_statements(child)


@pytest.mark.parametrize("query", ["count-by-key", "stateless", "windowed-count"])
def test_no_rendered_test_returns_early(query: str, rendered_default: Path, tmp_path: Path) -> None:
    """A test that returns before its end (on the answer's kind, say) stops meaning anything for a
    fork whose query takes that branch, and says nothing: every test runs to its end (a branch
    asserts in each arm), or is skipped where CI would see it."""
    project = rendered_default if query == "count-by-key" else render(tmp_path, query=query)
    early = [f"{path.relative_to(project)}::{node.name} line {statement.lineno}"
             for path in sorted((project / "tests").rglob("test_*.py"))
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
             for statement in own_statements(node) if isinstance(statement, ast.Return)]
    assert not early, early


# The names of the other shapes' code: the windowed count's event times and windows, the stateless
# shape's projection.
OTHER_SHAPES_NAMES = {"event_time_field", "event_time", "event_times", "EventTime", "EventTimes", "MAX_EVENT_TIME_MS",
                      "EVENT_TIME_BASE_MS", "window_start", "window_key", "window_seconds", "windowed_changes",
                      "WindowedCountProcessor", "project_changes", "projection"}


def code_names(tree: ast.AST) -> set[str]:
    """The names a module's code uses or defines (not its docstrings or comments)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.update(node.name.split("."))
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.update(node.module.split("."))
    return names


def test_the_default_rendering_carries_no_code_of_the_other_query_shapes(rendered_default: Path) -> None:
    """A fork of the count owns the count's code: no event-time parsing, sample times, windows or
    projection left from the shapes it did not choose."""
    found = {f"{path.relative_to(rendered_default)}: {sorted(names)}"
             for path in sorted(rendered_default.rglob("*.py"))
             if (names := code_names(ast.parse(path.read_text())) & OTHER_SHAPES_NAMES)}
    assert not found, sorted(found)
