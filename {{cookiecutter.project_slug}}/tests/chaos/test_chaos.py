"""A chaos profile (`--chaos-profile`, quick unless given) against a three-broker Kafka (the
session's kafka_cluster: replication 3, min.insync.replicas=2): driver kills at the sink's fault
points (quick: every one; smoke: three, chosen by the seed), a Python
worker killed alone, a kill -9 and restart of one broker, then an independent read_committed
check of the output against the input.

The same seed against the at-least-once sink must show duplicates: the check has teeth. Only the
guarantees whose test is selected run (`pytest tests/chaos -k exactly_once` runs one).

Both runs go side by side (each job start costs Spark's start-up, and the runs spend much of
their time waiting for it); each restarts a broker once (each run the next one), so each also
lives through the other's restart. A single broker's kill -9 and restart, every partition
offline meanwhile, is the chaos of the cluster suite (tests/cluster) and of `make chaos-long`."""

from __future__ import annotations

import argparse
import io
from concurrent.futures import ThreadPoolExecutor

import pytest

from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}_tools import chaos
from {{ cookiecutter.package_name }}_tools.kafka_local import KafkaHandle, cluster_handle

pytestmark = pytest.mark.chaos

SEED = 1
FINAL_LINE = chaos.VERDICT_LINE


def run_profile(kafka, workdir, profile: str, guarantee: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    chaos.add_arguments(parser)
    args = parser.parse_args(["--profile", profile, "--seed", str(SEED), "--guarantee", guarantee,
                              "--workdir", str(workdir)])
    out = io.StringIO()
    try:
        code = chaos.run(args, kafka=kafka, out=out)
    except Exception as error:  # noqa: BLE001 - reported by the test that reads this run
        out.write(f"chaos raised {error!r}\n")
        code = -1
    return code, out.getvalue()


@pytest.fixture(scope="module")
def kafka(kafka_cluster) -> KafkaHandle:
    return cluster_handle(kafka_cluster)


@pytest.fixture(scope="module")
def profile(request) -> str:
    return request.config.getoption("chaos_profile")


# The test that reads each guarantee's run.
TESTS = {"exactly-once": "test_exactly_once_through_every_disruption",
         "at-least-once": "test_the_same_chaos_duplicates_with_the_at_least_once_sink"}


@pytest.fixture(scope="module")
def chaos_runs(request, kafka, profile, tmp_path_factory) -> dict[str, tuple[int, dict[str, str], str]]:
    selected = {item.originalname for item in request.session.items}
    guarantees = [guarantee for guarantee in chaos.GUARANTEES if TESTS[guarantee] in selected]
    with ThreadPoolExecutor(len(guarantees)) as pool:
        futures = {guarantee: pool.submit(run_profile, kafka, tmp_path_factory.mktemp(guarantee), profile, guarantee)
                   for guarantee in guarantees}
    runs = {}
    for guarantee, future in futures.items():
        code, output = future.result()
        print(output)  # the progress lines, shown with the test's output
        match = FINAL_LINE.match(output.strip().splitlines()[-1])
        runs[guarantee] = (code, match.groupdict() if match else {}, output)
    return runs


def result_of(chaos_runs, profile: str, guarantee: str) -> tuple[int, dict[str, str], str]:
    code, result, output = chaos_runs[guarantee]
    assert result, f"the last line of the {guarantee} run is not the machine-readable verdict:\n{output[-3000:]}"
    assert (result["seed"], result["guarantee"]) == (str(SEED), guarantee)
    assert int(result["records"]) == chaos.PROFILES[profile].events, output
    assert int(result["faults"]) == fault_runs(profile), output
    return code, result, output


def fault_runs(profile: str) -> int:
    """The runs a profile ends with a fault point: each of its chosen points, or every one."""
    return chaos.PROFILES[profile].fault_points or len(faults.POINTS)


@pytest.mark.timeout(3000)  # both runs: 10 to 20 minutes on 2 cores, depending on what else runs
def test_exactly_once_through_every_disruption(chaos_runs, profile):
    code, result, output = result_of(chaos_runs, profile, "exactly-once")
    assert int(result["kills"]) >= fault_runs(profile), output
    assert int(result["broker_restarts"]) >= 1, output
    assert (result["lost"], result["duplicated"], result["dead_letter_ok"]) == ("0", "0", "true"), output
    assert code == 0, output


@pytest.mark.timeout(3000)
def test_the_same_chaos_duplicates_with_the_at_least_once_sink(chaos_runs, profile):
    code, result, output = result_of(chaos_runs, profile, "at-least-once")
    assert code == 0, output  # the run completed; the verdict is the point
    assert int(result["duplicated"]) > 0, "the at-least-once sink published no duplicate: the check has no teeth"
