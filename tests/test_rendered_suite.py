"""Run the rendered project's own test suite (unit and integration, on a real Kafka),
exactly as a team would after forking it: `make test` in a fresh virtual environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def test_rendered_project_suite_passes(rendered_default: Path, project_python: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`make test` does its own set-up (`make venv`); given the venv the template's tests already
    filled (VENV=...), that set-up is one editable install of this rendering instead of a new venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv = project_python.parent.parent
    with capsys.disabled():  # stream the inner suite's output: CI logs show every test and the broker line
        print(f"\n=== rendered project suite: make test VENV={venv} in {rendered_default}", flush=True)
        result = subprocess.run(["make", "test", f"VENV={venv}"], cwd=rendered_default, env=env, check=False)
    assert result.returncode == 0, "the rendered project's test suite failed; its output is above"


def test_rendered_project_runs_on_a_standalone_cluster(rendered_default: Path, project_python: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`make test-cluster`: the job submitted by deploy/spark-submit.sh to a local Spark standalone
    cluster, its checkpoint on a local S3 server, killed at every fault point, a worker lost, and
    the chaos quick profile with worker kills and S3 server restarts."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv = project_python.parent.parent
    with capsys.disabled():
        print(f"\n=== rendered project cluster suite: make test-cluster VENV={venv}", flush=True)
        result = subprocess.run(["make", "test-cluster", f"VENV={venv}"], cwd=rendered_default, env=env, check=False)
    assert result.returncode == 0, "the rendered project's cluster suite failed; its output is above"
