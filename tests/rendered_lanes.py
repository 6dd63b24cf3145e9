"""The rendered project's own suites as CI runs them, in two lanes of processes side by side:
`make test` then the stateless shape's proof; `make test-cluster`, then MOVED, then the Avro
rendering's proof, the windowed count's and the Protobuf rendering's. The lanes start before the template's first test
(conftest.rendered_lanes), so that the template's own tests run beside them, and
test_rendered_suite.py, run last, waits for them and judges them. Each lane writes to a log of its
own; the judge streams `make test`'s as it grows and prints the cluster lane's when it ends."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import render, rendering_env
from cpu_accounts import (
    PLUGIN,
    PLUGIN_DIR,
    Account,
    containers_seconds,
    machine_seconds,
    per_test,
    table,
)

# From `make test` to the cluster lane, so that the lanes end about together (the chaos run on three
# brokers, 3:04 in CI).
MOVED = ("tests/chaos",)
# Left out of CI for its time, each proved by other tests that run: the crash with the checkpoint on
# S3 under local Spark (the cluster suite crashes the job with its checkpoint on S3,
# and kills the S3 server while it writes); the cluster's chaos smoke run (the cluster suite's
# crash test fires CLUSTER_CRASH_POINTS, and a worker and the S3 server are killed in tests of their own;
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

# The cluster suite's crash test fires the points where the cluster changes what a crash leaves: phase 2
# in the executors' publishing tasks (before and after the Kafka commit, the task killing the driver)
# and the files on S3 a restart reads (the sink log's prepared entry, Spark's torn commits/N). The
# driver's two others (the batch computed, the log's committed entry) leave on S3 what their
# neighbours leave, read by the same code; `make test` fires every point in every place, locally.
CLUSTER_CRASH_POINTS = ("after_log_entry", "before_kafka_commit", "after_kafka_commit", "writing_spark_commit")
CRASH_TESTS = ("tests/integration/test_exactly_once.py::test_exactly_once_through_a_crash_at_each_point_of_the_commit_protocol",
               "tests/integration/test_exactly_once.py::test_the_same_crash_duplicates_with_the_at_least_once_sink")
# The other renderings' proof, each in a rendering of its own (the same venv, the rendering's code
# first on the path), after a lane's suite: the crash at the points whose recovery depends on what
# the rendering changes and the at-least-once counter-proof, judged by its model (record by record)
# and by a run without faults; for the windowed count, its late events too; for Avro, its own tests
# (malformed kinds, schema evolution, the registry's faults). Not their chaos runs (1:40-1:50 each,
# on three brokers): a fork's own `make test` runs the chaos test and the crash at every point on
# its rendering (and its nightly workflow the soak).
RENDERINGS = {
    "stateless": {"query": "stateless"},
    "windowed-count": {"query": "windowed-count"},
    "avro": {"value_format": "avro"},
    "protobuf": {"value_format": "protobuf"},
}
# The default rendering's tests of Avro and of the registry run in the Avro rendering alone (the
# same tests: they set the formats they prove), not in `make test` as well.
AVRO_TESTS = ("tests/integration/test_avro.py", "tests/integration/test_schema_registry.py")
# Protobuf's own tests (malformed kinds, schema evolution, the output schema checked) in the Protobuf
# rendering alone; the registry's faults are the Avro rendering's to prove, the same code whatever the format.
PROTOBUF_TESTS = ("tests/integration/test_protobuf.py",)
# Routing (route, [routes]) is proved on the stateless rendering, whose records route one by one:
# the default rendering's `make test` leaves it out, a fork's runs it on its own shape.
ROUTING_TESTS = ("tests/integration/test_routing.py",)
RENDERING_TESTS = {
    "stateless": (*CRASH_TESTS, *ROUTING_TESTS),
    "windowed-count": (*CRASH_TESTS, "tests/integration/test_late_events.py"),
    "avro": (*CRASH_TESTS, *AVRO_TESTS),
    "protobuf": (*CRASH_TESTS, *PROTOBUF_TESTS),
}
# The batch computed again from the checkpoint with nothing published (the query's state as Spark
# left it), the re-run after the Kafka commit (its records computed again and compared by digest),
# and commits/N torn (the batch's state already written): what a shape's recovery is made of. The
# other points are the sink log's and phase 2's, the same code whatever the query; the default
# rendering's crash test fires every point in every place. Half the crash runs.
SHAPE_CRASH_POINTS = ("batch_computed", "after_kafka_commit", "writing_spark_commit")
# What the values' format changes in a recovery: the batch decoded again, and its records encoded
# again after the Kafka commit, compared with the first attempt's by digest (on the driver and in
# the tasks). The torn commit is the query's state, the same bytes whatever the format.
CRASH_POINTS = {"stateless": SHAPE_CRASH_POINTS, "windowed-count": SHAPE_CRASH_POINTS,
                "avro": ("batch_computed", "after_kafka_commit"), "protobuf": ("batch_computed", "after_kafka_commit")}


def deselections(*tests: str) -> str:
    """PYTEST_ADDOPTS's value leaving `tests` out (not --ignore: testpaths name them), each option
    quoted: pytest splits the variable as a shell would, and a parametrized test's id may hold spaces."""
    return " ".join(shlex.quote(f"--deselect={test}") for test in tests)


def deselecting(*tests: str, options: str = "") -> str:
    """PYTEST_ADDOPTS=... for a make target's command line, leaving `tests` out (and the per-test
    CPU plugin loaded), with pytest's `options` beside."""
    return "PYTEST_ADDOPTS=" + shlex.quote(f"{PLUGIN} {deselections(*tests)} {options}".strip())


def rendering_run(name: str, tmp_path: Path, venv: Path) -> str:
    """The shell command that runs a rendering's proof (RENDERING_TESTS) in it, rendered here."""
    project = render(tmp_path / name, **RENDERINGS[name])
    path = os.pathsep.join((rendering_env(project)["PYTHONPATH"], str(PLUGIN_DIR)))
    return (f"cd {shlex.quote(str(project))} && PYTHONPATH={shlex.quote(path)} "
            f"CI_CPU_LANE=\"$CI_CPU_LANE, {name}\" "
            f"{shlex.quote(str(venv / 'bin' / 'pytest'))} -p no:cacheprovider "
            f"--crash-points={','.join(CRASH_POINTS[name])} {shlex.join(RENDERING_TESTS[name])}")


def heading(name: str) -> str:
    return shlex.quote(f"=== the {name} rendering: {' '.join(RENDERING_TESTS[name])}")


@dataclass
class Lanes:
    """The two lanes' processes (each the leader of its own process group) and their logs."""

    suite: subprocess.Popen[bytes]
    cluster: subprocess.Popen[bytes]
    suite_log: Path
    cluster_log: Path
    started: float
    accounts: dict[str, Account | None]  # each lane's CPU account (cpu_accounts.py), None where none could be made
    cpu_log: Path  # the lanes' tests, one JSON line each (cpu_plugin/cpu_seconds.py)
    machine_at_start: float
    containers_at_start: float | None

    def follow_suite(self) -> int:
        """Print `make test`'s lane's log as it grows, until the lane ends; its exit code."""
        with self.suite_log.open(errors="replace") as log:
            while True:
                ended = self.suite.poll() is not None  # before the read: nothing written after it is missed
                if text := log.read():
                    print(text, end="", flush=True)
                elif ended:
                    return self.suite.returncode
                else:
                    time.sleep(1)

    def cpu_table(self, walls: dict[str, float]) -> str:
        """Where the lanes' time went (cpu_accounts.table), since they began; the accounts removed."""
        lanes = {}
        for name, account in self.accounts.items():
            lanes[name] = (walls[name], None if account is None else account.seconds())
            if account is not None:
                account.remove()
        containers = containers_seconds()  # the engine makes its group with its first container: 0 before
        return table(lanes, machine_seconds() - self.machine_at_start,
                     None if containers is None else containers - (self.containers_at_start or 0.0),
                     per_test(self.cpu_log))

    def stop(self, grace_seconds: float = 60) -> None:
        """End a lane still running (its judge failed or was interrupted): interrupted as Ctrl-C
        would, so that its tests stop the brokers, clusters and containers they started; killed,
        with every process of its group, if it has not ended within `grace_seconds`."""
        running = [lane for lane in (self.suite, self.cluster) if lane.poll() is None]
        for lane in running:
            os.killpg(lane.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_seconds
        for lane in running:
            try:
                lane.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(lane.pid, signal.SIGKILL)
                lane.wait()


def start_lanes(venv: Path, workdir: Path) -> Lanes:
    """Start both lanes on a default rendering of their own in `workdir` (the template's tests read
    theirs meanwhile: the lanes' runs leave files in a project), with `venv` (the template tests'
    shared project venv, which `make venv` first makes one editable install of that rendering); the
    other shapes' renderings and the logs go to `workdir` too. Raises, with its output, if `make venv` fails."""
    project = render(workdir / "default")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTEST_CURRENT_TEST")}
    make = ["make", f"VENV={venv}"]
    suite_log, cluster_log = workdir / "make-test.log", workdir / "test-cluster.log"
    with suite_log.open("w") as log:
        made = subprocess.run([*make, "venv"], cwd=project, env=env, check=False, stdout=log, stderr=subprocess.STDOUT)
    if made.returncode != 0:
        raise RuntimeError(f"`make venv` for the rendered suites failed ({made.returncode}):\n"
                           f"{suite_log.read_text(errors='replace')[-3000:]}")
    stateless_run, windowed_run, avro_run, protobuf_run = (
        rendering_run(name, workdir, venv) for name in ("stateless", "windowed-count", "avro", "protobuf"))
    pytest_bin = shlex.quote(str(venv / "bin" / "pytest"))
    moved = " ".join(MOVED)
    cluster_points = f"--crash-points={','.join(CLUSTER_CRASH_POINTS)}"
    cluster_lane = (f"{deselecting(*LEFT_OUT['test-cluster'], options=cluster_points)} {shlex.join([*make, 'test-cluster'])}; cluster=$?; "
                    f"CI_CPU_LANE=\"$CI_CPU_LANE, moved\" {pytest_bin} {moved}; moved=$?; "
                    f"echo {heading('avro')}; ({avro_run}); avro=$?; "
                    f"echo {heading('windowed-count')}; ({windowed_run}); windowed=$?; "
                    f"echo {heading('protobuf')}; ({protobuf_run}); protobuf=$?; "
                    "exit $((cluster || moved || avro || windowed || protobuf))")
    suite_lane = (f"{deselecting(*MOVED, *AVRO_TESTS, *PROTOBUF_TESTS, *ROUTING_TESTS, *LEFT_OUT['test'])} {shlex.join([*make, 'test'])}; suite=$?; "
                  f"echo {heading('stateless')}; ({stateless_run}); stateless=$?; "
                  "exit $((suite || stateless))")

    cpu_log = workdir / "cpu-per-test.jsonl"
    accounts = {"make test": Account.new("suite"), "make test-cluster": Account.new("cluster")}
    lane_env = {**env, "PYTHONPATH": str(PLUGIN_DIR), "PYTEST_ADDOPTS": PLUGIN, "CI_CPU_LOG": str(cpu_log)}
    machine_at_start, containers_at_start = machine_seconds(), containers_seconds()

    def lane(name: str, command: str, log_path: Path) -> subprocess.Popen[bytes]:
        # Interrupted (Lanes.stop), a lane ends once its running test session has torn down.
        # The lane's shell joins its account first: everything it starts is charged to it.
        account = accounts[name]
        join = "" if account is None else f"echo $$ > {shlex.quote(str(account.tasks))}; "
        with log_path.open("a") as log:
            return subprocess.Popen(["bash", "-c", f"{join}trap 'exit 130' INT; {command}"], cwd=project,
                                    env={**lane_env, "CI_CPU_LANE": name,
                                         "CI_CPU_ACCOUNT": "" if account is None else str(account.path)},
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)

    cluster = lane("make test-cluster", cluster_lane, cluster_log)
    try:
        suite = lane("make test", suite_lane, suite_log)
    except BaseException:
        os.killpg(cluster.pid, signal.SIGKILL)
        raise
    return Lanes(suite, cluster, suite_log, cluster_log, time.monotonic(), accounts, cpu_log, machine_at_start,
                 containers_at_start)
