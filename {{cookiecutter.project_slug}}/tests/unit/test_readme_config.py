"""The README's configuration table is held to the code: every option of JobConfig has its row,
every name a row gives is an option, and every default the table states is the code's."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from {{ cookiecutter.package_name }}.config import JobConfig

README = Path(__file__).resolve().parents[2] / "README.md"
HEADER = "\n| option | default | meaning |\n| --- | --- | --- |\n"
UNSTATED = ("from the template answers",)  # a default the row points to instead of stating


def table() -> list[tuple[list[str], str]]:
    """(option names, default cell) per row of the table."""
    rows = README.read_text().split(HEADER, 1)[1].split("\n\n", 1)[0].splitlines()
    parsed = []
    for row in rows:
        names, default, _meaning = row.strip().strip("|").split(" | ", 2)
        parsed.append((re.findall(r"`\[?([a-z0-9_]+)\]?`", names), default.strip()))
    return parsed


def stated(cell: str, value: object) -> bool:
    """Whether a default as the table writes it (`127.0.0.1:9092`, 60, true, empty) is `value`."""
    text = cell.strip().strip("`").strip()
    if isinstance(value, bool):
        return text == str(value).lower()
    if isinstance(value, int | float):
        return float(text) == float(value)
    if isinstance(value, dict):
        return text == "empty" if not value else all(f"{k} = " in text for k in value)
    return text == str(value)


def test_every_option_has_its_row_and_every_row_names_options() -> None:
    options = {field.name for field in dataclasses.fields(JobConfig)}
    named = [name for names, _ in table() for name in names]
    assert sorted(options - set(named)) == [], "options without a row in the README's table"
    assert sorted(set(named) - options) == [], "rows naming no option"
    assert len(named) == len(set(named)), "an option with two rows"


def test_every_default_the_table_states_is_the_codes() -> None:
    defaults = JobConfig()
    for names, cell in table():
        if cell in UNSTATED:
            continue
        cells = [part.strip() for part in cell.split(", ")] if len(names) > 1 else [cell]
        assert len(cells) == len(names), (names, cell)
        for name, default in zip(names, cells, strict=True):
            assert stated(default, getattr(defaults, name)), f"{name}: the README says {default}, " \
                                                             f"the code {getattr(defaults, name)!r}"
