"""Fixtures for testing the template itself: render it with cookiecutter's Python API."""

from __future__ import annotations

from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parents[1]


def render(output_dir: Path, **answers: str) -> Path:
    return Path(cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(output_dir), extra_context=answers))


@pytest.fixture(scope="session")
def rendered_default(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project as `cookiecutter <template>` renders it with every default answer."""
    return render(tmp_path_factory.mktemp("default"))
