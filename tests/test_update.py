"""Updating a fork with cruft: a project created from the template at commit A takes the template's
commit B with `cruft update -y` (its version too), keeping the team's own changes, and
`.cruft.json` then names B."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import TEMPLATE

CRUFT = Path(sys.executable).with_name("cruft")
GIT_IDENTITY = ["-c", "user.name=Template Test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"]
NOT_TEMPLATE = shutil.ignore_patterns(".git", ".venv", "demo", "bench-out", "__pycache__", ".pytest_cache",
                                      ".ruff_cache", "*.egg-info")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *GIT_IDENTITY, *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def cruft(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CRUFT), *args], cwd=cwd, capture_output=True, text=True, check=False)


def test_cruft_update_brings_template_changes_into_a_fork(tmp_path: Path) -> None:
    template = tmp_path / "template"
    shutil.copytree(TEMPLATE, template, ignore=NOT_TEMPLATE)
    git(template, "init", "-q", "-b", "main")
    commit_a = commit_all(template, "A")

    created = cruft(tmp_path, "create", "--no-input", "--output-dir", str(tmp_path / "forks"), str(template))
    assert created.returncode == 0, created.stdout + created.stderr
    project = tmp_path / "forks" / "color-counts"
    cruft_state = json.loads((project / ".cruft.json").read_text())
    assert cruft_state["commit"] == commit_a
    assert cruft_state["context"]["cookiecutter"]["input_topic"] == "events"

    # The team owns its fork: a git repository with its own changes.
    git(project, "init", "-q", "-b", "main")
    commit_all(project, "generated")
    job = project / "job.toml"
    job.write_text(job.read_text().replace("max_record_bytes = 65536", "max_record_bytes = 131072"))
    commit_all(project, "our own setting")

    # The template moves on: a changed file and a new rendered one.
    slug_dir = template / "{{cookiecutter.project_slug}}"
    with (slug_dir / "Makefile").open("a") as makefile:
        makefile.write("\n# template change B\n")
    (slug_dir / "UPGRADING.md").write_text("# Upgrading {{ cookiecutter.project_name }}\n")
    # A release: cruft renders B with B's private variables, not those .cruft.json recorded at A.
    answers = template / "cookiecutter.json"
    released = json.loads(answers.read_text()) | {"_template_version": "99.0.0"}
    answers.write_text(json.dumps(released, indent=2) + "\n")
    commit_b = commit_all(template, "B")
    assert cruft(project, "check").returncode != 0, "cruft check must say the fork is behind"

    updated = cruft(project, "update", "-y")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    assert (project / "Makefile").read_text().endswith("# template change B\n")
    assert (project / "UPGRADING.md").read_text() == "# Upgrading Color Counts\n"
    assert "max_record_bytes = 131072" in job.read_text(), "the team's own change must survive"
    assert '__version__ = "99.0.0"' in (project / "src" / "color_counts" / "__init__.py").read_text()
    assert json.loads((project / ".cruft.json").read_text())["commit"] == commit_b
    assert cruft(project, "check").returncode == 0
