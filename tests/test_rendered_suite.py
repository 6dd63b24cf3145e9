"""Run the rendered project's own test suites (unit and integration on a real Kafka; the cluster
suite on a Spark standalone cluster), exactly as a team would after forking it: `make test` and
`make test-cluster` in its virtual environment."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

MOVED = "tests/chaos"  # from `make test` to the cluster lane


def test_rendered_project_suites_pass(rendered_default: Path, project_python: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`make test` and `make test-cluster`, side by side: each suite waits on Kafka, Spark and its
    processes for a good share of its time, which the other one uses. `make test`'s chaos test
    runs in the cluster lane, after `make test-cluster`, so that the two lanes end together
    (each ran about 34 and 28 minutes otherwise); every test of both targets runs once. The set-up
    (`make venv`) runs first, once: given the venv the template's tests already filled (VENV=...),
    it is one editable install of this rendering. `make test` streams its output; the cluster
    lane's log is printed when it ends."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv = project_python.parent.parent
    make = ["make", f"VENV={venv}"]
    cluster_log = tmp_path / "test-cluster.log"
    with capsys.disabled():  # stream the inner suite's output: CI logs show every test and the broker line
        subprocess.run([*make, "venv"], cwd=rendered_default, env=env, check=True)
        print(f"\n=== rendered project suites: make test and make test-cluster VENV={venv} in {rendered_default}"
              f" (the cluster lane's log: {cluster_log}, printed when it ends)", flush=True)
        lane = f"{shlex.join([*make, 'test-cluster'])}; cluster=$?; {shlex.quote(str(venv / 'bin' / 'pytest'))} " \
               f"{MOVED}; chaos=$?; exit $((cluster || chaos))"
        with open(cluster_log, "w") as log:
            cluster = subprocess.Popen(["bash", "-c", lane], cwd=rendered_default, env=env, stdout=log,
                                       stderr=subprocess.STDOUT)
        started = time.monotonic()
        try:
            suite = subprocess.run([*make, "test"], cwd=rendered_default, check=False,
                                   env={**env, "PYTEST_ADDOPTS": f"--deselect={MOVED}"})  # not --ignore: testpaths name it
            cluster.wait()
        finally:
            if cluster.poll() is None:
                cluster.kill()
        print(f"\n=== rendered project cluster lane: make test-cluster, then {MOVED} (ended "
              f"{time.monotonic() - started:.0f}s after both began):\n{cluster_log.read_text(errors='replace')}",
              flush=True)
    lanes = (("make test", suite.returncode), (f"make test-cluster or {MOVED}", cluster.returncode))
    failed = [name for name, code in lanes if code != 0]
    assert not failed, f"the rendered project's {' and '.join(failed)} failed; the output is above"
