"""The rendered project's own test suites (unit and integration on a real Kafka; the cluster
suite on a Spark standalone cluster), exactly as a team would run them after forking it: `make
test` and `make test-cluster` in its virtual environment. They run in three lanes
(rendered_lanes.py) beside the template's own tests; the test that judges them runs last."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from conftest import rendering_env
from rendered_lanes import LEFT_OUT, Lanes, deselections


def test_every_test_left_out_of_ci_names_one_the_rendered_project_has(rendered_default: Path,
                                                                         project_python: Path) -> None:
    """A deselection that names no test leaves nothing out, silently: each of LEFT_OUT must name one."""
    left_out = [test for tests in LEFT_OUT.values() for test in tests]
    env = {**rendering_env(rendered_default), "PYTEST_ADDOPTS": deselections(*left_out)}
    collected = subprocess.run([str(project_python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                                *sorted({test.split("::")[0] for test in left_out})],
                               cwd=rendered_default, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert f"({len(left_out)} deselected)" in collected.stdout, collected.stdout[-3000:] + collected.stderr[-3000:]


def test_rendered_project_suites_pass(rendered_lanes: Lanes | None, capsys: pytest.CaptureFixture[str]) -> None:
    """`make test`, `make test-cluster` and the other renderings' proofs, side by side
    (rendered_lanes.py), started before the template's first test (conftest.rendered_lanes) and
    judged here, last. Every test of both targets runs once, in its lane or one it was MOVED to,
    but those LEFT_OUT."""
    assert rendered_lanes is not None, "conftest.rendered_lanes starts the lanes when this test is selected"
    first, *others = rendered_lanes.lanes
    codes, walls = {}, {}
    with capsys.disabled():  # stream the inner suite's output: CI logs show every test and the broker line
        print(f"\n=== rendered project suites: {first.name} (its log so far, then as it grows); "
              + "; ".join(f"{lane.runs} (its log: {lane.log}, printed when it ends)" for lane in others), flush=True)
        codes[first.name] = first.follow()
        walls[first.name] = time.monotonic() - rendered_lanes.started
        for lane in others:
            codes[lane.name] = lane.process.wait()
            walls[lane.name] = time.monotonic() - rendered_lanes.started
            print(f"\n=== rendered project lane: {lane.runs} (ended {walls[lane.name]:.0f}s after the lanes began):\n"
                  f"{lane.log.read_text(errors='replace')}", flush=True)
        # Where the lanes' minutes went: CPU seconds per lane and per test (cpu_accounts.py).
        print(f"\n=== where the lanes' time went (CPU from each lane's cgroup; the machine's over the same "
              f"span; the costliest tests):\n{rendered_lanes.cpu_table(walls)}", flush=True)
    failed = [lane.runs for lane in rendered_lanes.lanes if codes[lane.name] != 0]
    assert not failed, f"in the rendered project, {' and '.join(failed)}: failed; the output is above"
