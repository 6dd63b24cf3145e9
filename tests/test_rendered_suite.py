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
from conftest import render, rendering_env

# From `make test` to the cluster lane, so that the lanes end about together (in the CI log of
# a6692d3, `make test` and the stateless shape's tests with its chaos run took 36:17, the cluster
# lane 39:03 with the broker-outage test, 1:24, moved too; it is back in `make test` since).
MOVED = ("tests/chaos", "tests/integration/test_zombie_driver.py")
# Left out of CI for its time, each proved by other tests that run: the crash with the checkpoint on
# S3 under local Spark (the cluster suite crashes the job at every point with its checkpoint on S3,
# and kills the S3 server while it writes); the cluster's chaos smoke run (the cluster suite's
# crash test fires every point, and a worker and the S3 server are killed in tests of their own;
# tests/chaos runs the chaos runner on three brokers); the driver killed at each point on three
# brokers (3:00 in the CI log of acb9e8a: tests/chaos's quick profile kills the driver at every
# point on three brokers, with a broker restart among them); the determinism check on a second
# kind of query that is not deterministic (0:43: the one on the current time fails it the same way).
LEFT_OUT = {"test": ("tests/integration/test_s3_checkpoint.py::test_a_checkpoint_on_s3_holds_exactly_once_through_a_crash",
                     ("tests/integration/test_determinism.py::test_a_query_that_is_not_deterministic_fails_the_check_at_"
                      "its_first_differing_record[rand() * 1000]")),
            "test-cluster": ("tests/cluster/test_cluster.py::test_the_chaos_smoke_profile_on_the_cluster",
                             ("tests/kafka_cluster/test_broker_faults.py::test_the_driver_killed_at_each_point_of_the_"
                              "commit_protocol_on_three_brokers"))}

CRASH_TESTS = ("tests/integration/test_exactly_once.py::test_exactly_once_through_a_crash_at_each_point_of_the_commit_protocol",
               "tests/integration/test_exactly_once.py::test_the_same_crash_duplicates_with_the_at_least_once_sink")
# The other query shapes' proof, each in a rendering of its own (the same venv, the rendering's code
# first on the path), after a lane's suite: the crash at the points whose recovery depends on the
# query (SHAPE_CRASH_POINTS) and the at-least-once counter-proof, judged by the shape's model
# (record by record) and by a run without faults; for the windowed count, its late events too.
# Not their chaos runs (1:40-1:50 each, on three brokers): a fork's own `make test` runs the
# chaos test and the crash at every point on its shape (and its nightly workflow the soak).
SHAPE_TESTS = {
    "stateless": CRASH_TESTS,
    "windowed-count": (*CRASH_TESTS, "tests/integration/test_late_events.py"),
}
# The batch computed again from the checkpoint with nothing published (the query's state as Spark
# left it), the re-run after the Kafka commit (its records computed again and compared by digest),
# and commits/N torn (the batch's state already written): what a shape's recovery is made of. The
# other points are the sink log's and phase 2's, the same code whatever the query; the default
# rendering's crash test fires every point in every place. Half the crash runs.
SHAPE_CRASH_POINTS = ("batch_computed", "after_kafka_commit", "writing_spark_commit")


def deselections(*tests: str) -> str:
    """PYTEST_ADDOPTS's value leaving `tests` out (not --ignore: testpaths name them), each option
    quoted: pytest splits the variable as a shell would, and a parametrized test's id may hold spaces."""
    return " ".join(shlex.quote(f"--deselect={test}") for test in tests)


def deselecting(*tests: str) -> str:
    """PYTEST_ADDOPTS=... for a make target's command line, leaving `tests` out."""
    return "PYTEST_ADDOPTS=" + shlex.quote(deselections(*tests))


def shape_run(shape: str, tmp_path: Path, venv: Path) -> str:
    """The shell command that renders nothing (the rendering is made here) and runs the shape's tests."""
    project = render(tmp_path / shape, query=shape)
    return (f"cd {shlex.quote(str(project))} && PYTHONPATH={shlex.quote(rendering_env(project)['PYTHONPATH'])} "
            f"{shlex.quote(str(venv / 'bin' / 'pytest'))} -p no:cacheprovider "
            f"--crash-points={','.join(SHAPE_CRASH_POINTS)} {shlex.join(SHAPE_TESTS[shape])}")


def test_every_test_left_out_of_ci_names_one_the_rendered_project_has(rendered_default: Path,
                                                                         project_python: Path) -> None:
    """A deselection that names no test leaves nothing out, silently: each of LEFT_OUT must name one."""
    left_out = [test for tests in LEFT_OUT.values() for test in tests]
    env = {**rendering_env(rendered_default), "PYTEST_ADDOPTS": deselections(*left_out)}
    collected = subprocess.run([str(project_python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                                *sorted({test.split("::")[0] for test in left_out})],
                               cwd=rendered_default, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert f"({len(left_out)} deselected)" in collected.stdout, collected.stdout[-3000:] + collected.stderr[-3000:]


def test_rendered_project_suites_pass(rendered_default: Path, project_python: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`make test` and `make test-cluster`, side by side: each suite waits on Kafka, Spark and its
    processes for a good share of its time, which the other one uses. Tests of `make test` named
    in MOVED run in the cluster lane, after `make test-cluster`, in one session, so that the two
    lanes end together; every test of both targets runs once, but those LEFT_OUT. The set-up
    (`make venv`) runs first, once: given the venv the template's tests already filled
    (VENV=...), it is one editable install of this rendering. `make test` streams its output; the cluster lane's log is printed
    when it ends. Each lane then runs one of the other query shapes' proof (SHAPE_TESTS): the
    stateless query after `make test`, the windowed count (the longer one) after the cluster lane's
    moved tests."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    venv = project_python.parent.parent
    make = ["make", f"VENV={venv}"]
    cluster_log = tmp_path / "test-cluster.log"
    stateless_run, windowed_run = shape_run("stateless", tmp_path, venv), shape_run("windowed-count", tmp_path, venv)
    pytest_bin = shlex.quote(str(venv / "bin" / "pytest"))
    moved = " ".join(MOVED)
    with capsys.disabled():  # stream the inner suite's output: CI logs show every test and the broker line
        subprocess.run([*make, "venv"], cwd=rendered_default, env=env, check=True)
        print(f"\n=== rendered project suites: make test and make test-cluster VENV={venv} in {rendered_default}"
              f" (the cluster lane's log: {cluster_log}, printed when it ends)", flush=True)
        windowed_heading = f"=== the windowed-count shape: {' '.join(SHAPE_TESTS['windowed-count'])}"
        lane = (f"{deselecting(*LEFT_OUT['test-cluster'])} {shlex.join([*make, 'test-cluster'])}; cluster=$?; "
                f"{pytest_bin} {moved}; moved=$?; "
                f"echo {shlex.quote(windowed_heading)}; ({windowed_run}); windowed=$?; "
                "exit $((cluster || moved || windowed))")
        with open(cluster_log, "w") as log:
            cluster = subprocess.Popen(["bash", "-c", lane], cwd=rendered_default, env=env, stdout=log,
                                       stderr=subprocess.STDOUT)
        started = time.monotonic()
        try:
            make_test = f"{deselecting(*MOVED, *LEFT_OUT['test'])} {shlex.join([*make, 'test'])}"
            stateless_heading = f"=== the stateless shape: {' '.join(SHAPE_TESTS['stateless'])}"
            suite = subprocess.run(
                ["bash", "-c", (f"{make_test}; suite=$?; echo {shlex.quote(stateless_heading)}; ({stateless_run}); "
                                "stateless=$?; exit $((suite || stateless))")],
                cwd=rendered_default, check=False, env=env)
            cluster.wait()
        finally:
            if cluster.poll() is None:
                cluster.kill()
        print(f"\n=== rendered project cluster lane: make test-cluster, then {moved}, then the windowed-count "
              f"shape's tests (ended {time.monotonic() - started:.0f}s after both began):\n"
              f"{cluster_log.read_text(errors='replace')}", flush=True)
    lanes = (("make test or the stateless shape's tests", suite.returncode),
             (f"make test-cluster, {moved} or the windowed-count shape's tests", cluster.returncode))
    failed = [name for name, code in lanes if code != 0]
    assert not failed, f"the rendered project's {' and '.join(failed)} failed; the output is above"
