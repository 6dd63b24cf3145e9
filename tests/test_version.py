"""One version: the newest release in CHANGELOG.md is what a rendered project says it is
(`--version`, its wheels, its image tag), all from cookiecutter.json's `_template_version`."""

from __future__ import annotations

import ast
import json
import re
import tomllib
from pathlib import Path

from conftest import TEMPLATE

RELEASE = re.compile(r"^## (\d+\.\d+\.\d+) \(\d{4}-\d{2}-\d{2}\)$", re.MULTILINE)


def newest_release(changelog: str) -> str:
    """The first `## X.Y.Z (date)` heading: "## Unreleased" above it is not a version yet."""
    found = RELEASE.search(changelog)
    assert found is not None, "no release heading `## X.Y.Z (YYYY-MM-DD)` in the changelog"
    return found.group(1)


def template_release() -> str:
    return newest_release((TEMPLATE / "CHANGELOG.md").read_text())


def rendered_version(project: Path, package: str) -> str:
    tree = ast.parse((project / "src" / package / "__init__.py").read_text())
    return next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                and [target.id for target in node.targets if isinstance(target, ast.Name)] == ["__version__"]
                and isinstance(node.value, ast.Constant))


def test_the_template_version_is_the_newest_release() -> None:
    declared = json.loads((TEMPLATE / "cookiecutter.json").read_text())["_template_version"]
    assert declared == template_release(), "cookiecutter.json's _template_version is not CHANGELOG.md's newest release"


def test_the_rendered_project_carries_the_newest_release(rendered_default: Path,
                                                          default_answers: dict[str, str]) -> None:
    version = template_release()
    assert rendered_version(rendered_default, default_answers["package_name"]) == version
    tools = tomllib.loads((rendered_default / "tools" / "pyproject.toml").read_text())
    assert tools["project"]["version"] == version
    job = tomllib.loads((rendered_default / "pyproject.toml").read_text())
    assert "version" not in job["project"] and job["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": f"{default_answers['package_name']}.__version__"}  # the wheel's version is __version__
    manifest = (rendered_default / "deploy" / "k8s" / "spark-application.yaml").read_text()
    assert f'image: "{default_answers["project_slug"]}:{version}"' in manifest  # what `make image` tags


def test_the_newest_release_is_the_first_heading_with_a_version() -> None:
    changelog = "# Changelog\n\n## Unreleased\n\n- 1.0.0 is next\n\n## 0.10.1 (2027-02-01)\n\n## 0.9.0 (2026-12-01)\n"
    assert newest_release(changelog) == "0.10.1"
