"""docs/configuration.md's table is the code's own: written from JobConfig by the tools'
reference.py (each option's type, the rules config.py's checks enforce, its default, its
environment variable and its meaning), so an option added, a default changed or a rule added
shows in docs/configuration.md or fails here."""

from __future__ import annotations

from pathlib import Path

from {{ cookiecutter.package_name }}_tools.reference import CONFIG_HEADER, config_table

CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_configuration_table_is_the_codes_own() -> None:
    document = CONFIGURATION.read_text()
    assert CONFIG_HEADER in document, "docs/configuration.md has no configuration table"
    written = document[document.index(CONFIG_HEADER):].split("\n\n", 1)[0].splitlines()
    generated = config_table().splitlines()
    differing = [f"docs:   {a}\ncode:   {b}" for a, b in zip(written, generated, strict=False) if a != b]
    assert written == generated, (
        "docs/configuration.md's table is out of date: paste the output of "
        "`.venv/bin/{{ cookiecutter.project_slug }}-tools reference config` over it (in the template, with the "
        "answers' values as cookiecutter expressions)\n" + "\n".join(differing[:3] or [f"{len(written)} rows "
                                                                         f"against {len(generated)}"]))
