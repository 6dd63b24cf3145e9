"""docs/cli.md is what the parsers say: every command, argument, default and help of the job's
command line and of its tools'."""

from __future__ import annotations

from pathlib import Path

from {{ cookiecutter.package_name }}_tools.reference import cli_reference

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_the_cli_reference_is_the_parsers_own() -> None:
    written, generated = REFERENCE.read_text().splitlines(), cli_reference().splitlines()
    differing = [i for i, (a, b) in enumerate(zip(written, generated, strict=False)) if a != b]
    first = differing[0] if differing else min(len(written), len(generated))
    assert written == generated, (f"docs/cli.md is out of date from line {first + 1}: run "
                                  "`.venv/bin/{{ cookiecutter.project_slug }}-tools reference > docs/cli.md`")
