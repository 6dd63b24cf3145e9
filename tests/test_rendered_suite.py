"""The rendered project's own test suites (unit and integration on a real Kafka; the cluster
suite on a Spark standalone cluster), exactly as a team would run them after forking it: `make
test` and `make test-cluster` in its virtual environment. They run in two lanes
(rendered_lanes.py) beside the template's own tests; the test that judges them runs last."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from conftest import rendering_env
from rendered_lanes import LEFT_OUT, MOVED, Lanes, deselections


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
    """`make test` and `make test-cluster`, side by side (rendered_lanes.py), started before the
    template's first test (conftest.rendered_lanes) and judged here, last: each lane spends a good
    share of its time waiting on Kafka, Spark and its processes, which the other lane and the
    template's own tests use. Tests of `make test` named in MOVED run in the cluster lane, after
    `make test-cluster`, in one session, so that the two lanes end together; every test of both
    targets runs once, but those LEFT_OUT. Each lane then runs other renderings' proof
    (RENDERING_TESTS): the stateless query after `make test`; the Avro values', the windowed
    count's and the Protobuf values' after the cluster lane's moved tests."""
    assert rendered_lanes is not None, "conftest.rendered_lanes starts the lanes when this test is selected"
    moved = " ".join(MOVED)
    with capsys.disabled():  # stream the inner suite's output: CI logs show every test and the broker line
        print(f"\n=== rendered project suites: make test (its log so far, then as it grows) and make test-cluster"
              f" (its log: {rendered_lanes.cluster_log}, printed when it ends)", flush=True)
        suite = rendered_lanes.follow_suite()
        walls = {"make test": time.monotonic() - rendered_lanes.started}
        cluster = rendered_lanes.cluster.wait()
        walls["make test-cluster"] = time.monotonic() - rendered_lanes.started
        print(f"\n=== rendered project cluster lane: make test-cluster, then {moved}, then the Avro, the windowed-count "
              f"and the Protobuf renderings' tests (ended {walls['make test-cluster']:.0f}s after both began):\n"
              f"{rendered_lanes.cluster_log.read_text(errors='replace')}", flush=True)
        # Where the lanes' minutes went: CPU seconds per lane and per test (cpu_accounts.py).
        print(f"\n=== where the lanes' time went (CPU from each lane's cgroup; the machine's over the same "
              f"span; the costliest tests):\n{rendered_lanes.cpu_table(walls)}", flush=True)
    lanes = (("make test or the stateless rendering's tests", suite),
             (f"make test-cluster, {moved}, the Avro, windowed-count or Protobuf rendering's tests", cluster))
    failed = [name for name, code in lanes if code != 0]
    assert not failed, f"the rendered project's {' and '.join(failed)} failed; the output is above"
