"""The default rendering: the right files, no template markers left, lint clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import has_template_markers

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
