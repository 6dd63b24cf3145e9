"""Fixtures for testing the template itself: render it with cookiecutter's Python API."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest
from cookiecutter.main import cookiecutter

if TYPE_CHECKING:
    from rendered_lanes import Lanes

TEMPLATE = Path(__file__).resolve().parents[1]


# Files whose own syntax uses {{ ... }}, and how to drop it before looking for cookiecutter's.
_NATIVE_BRACES = {
    ".github/workflows/ci.yml": re.compile(r"\$\{\{[^}]*\}\}"),  # GitHub's ${{ ... }} (copied unrendered)
    "deploy/k8s/alerts.yaml": re.compile(r"\{\{ \$[^}]*\}\}"),  # Prometheus's {{ $labels.x }}, {{ $value }}
}


def has_template_markers(relative_path: str, text: str) -> bool:
    """Whether a rendered file still holds cookiecutter/Jinja markers."""
    if (native := _NATIVE_BRACES.get(relative_path)) is not None:
        text = native.sub("", text)
    text = text.replace(".cookiecutter.json", "")  # the rendered answers' file, which a README may name
    return "{{" in text or "{%" in text or "cookiecutter." in text


def rendering_env(project: Path, *drop: str) -> dict[str, str]:
    """The environment a rendering's code runs in with the shared project venv (project_python):
    its src/ and tools/src/ first on the path, nothing of this test run's venv or pytest options,
    and none of `drop`."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTEST_ADDOPTS", *drop)}
    env["PYTHONPATH"] = os.pathsep.join((str(project / "src"), str(project / "tools" / "src")))
    return env


def render(output_dir: Path, **answers: str) -> Path:
    return Path(cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(output_dir), extra_context=answers))


@pytest.fixture(scope="session")
def rendered_with(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """The project rendered with these answers (the others the defaults), once per set of answers
    in a test run, for every test that reads that rendering."""
    renderings: dict[frozenset[tuple[str, str]], Path] = {}

    def rendering(**answers: str) -> Path:
        key = frozenset(answers.items())
        if key not in renderings:
            renderings[key] = render(tmp_path_factory.mktemp("rendered"), **answers)
        return renderings[key]

    return rendering


@pytest.fixture(scope="session")
def rendered_default(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project as `cookiecutter <template>` renders it with every default answer."""
    return render(tmp_path_factory.mktemp("default"))


def load_hook(name: str) -> ModuleType:
    """A hook file as a module: its answers are read inside main(), so importing it is safe."""
    spec = importlib.util.spec_from_file_location(f"hook_{name}", TEMPLATE / "hooks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def default_answers(rendered_default: Path) -> dict[str, str]:
    """Every default answer, as the post-generation hook recorded them."""
    return json.loads((rendered_default / ".cookiecutter.json").read_text())


@pytest.fixture(scope="session")
def project_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One venv with the rendered project's dependencies, installed once (pip's cache makes it quick).
    A rendering's unit tests then run with this interpreter and PYTHONPATH=<rendering>/src:<rendering>/tools/src."""
    source = render(tmp_path_factory.mktemp("venv-source"))
    venv = tmp_path_factory.mktemp("project-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", f"{source}[dev]", "-e",
         f"{source}/tools"],
        check=True,
    )
    return python


# The test that judges the rendered project's suites (test_rendered_suite.py): their lanes start
# before the first test when it is among the tests run, and it runs last, waiting for them.
SUITES_JUDGE = "test_rendered_project_suites_pass"


def is_suites_judge(item: pytest.Item) -> bool:
    return getattr(item, "originalname", item.name) == SUITES_JUDGE


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The judge of the rendered suites last: every other test runs while the lanes do."""
    items.sort(key=is_suites_judge)


@pytest.fixture(scope="session", autouse=True)
def rendered_lanes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lanes | None]:
    """The rendered project's suites (rendered_lanes.py), started before the first test when
    their judge is among the tests run (None otherwise): they take most of CI's time, the
    template's own tests a fraction of it (docs/testing.md, "Where CI's time goes"). Stopped at
    the end of the session if still running (their judge failed or was interrupted)."""
    if not any(map(is_suites_judge, request.session.items)):
        yield None
        return
    # Imported here: rendered_lanes imports this module's render().
    from rendered_lanes import start_lanes

    lanes = start_lanes(request.getfixturevalue("project_python").parent.parent, tmp_path_factory.mktemp("lanes"))
    try:
        yield lanes
    finally:
        lanes.stop()
