"""The chaos runner's quick profile against the session's Kafka broker: driver kills at every
fault point of the sink, a Python worker killed alone, a kill -9 and restart of the broker,
then an independent read_committed check of the output against the input.

The same seed against the at-least-once sink must show duplicates: the check has teeth."""

from __future__ import annotations

import argparse
import re

import pytest

from {{ cookiecutter.package_name }} import chaos
from {{ cookiecutter.package_name }}.sink import faults

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

SEED = 1
FINAL_LINE = re.compile(
    r"^chaos: seed=(?P<seed>\d+) guarantee=(?P<guarantee>[a-z-]+) records=(?P<records>\d+) kills=(?P<kills>\d+) "
    r"broker_restarts=(?P<broker_restarts>\d+) faults=(?P<faults>\d+) lost=(?P<lost>\d+) "
    r"duplicated=(?P<duplicated>\d+) dead_letter_ok=(?P<dead_letter_ok>true|false)$"
)


def run_quick_profile(kafka, tmp_path, capsys, guarantee: str) -> tuple[int, dict[str, str], str]:
    parser = argparse.ArgumentParser()
    chaos.add_arguments(parser)
    args = parser.parse_args(["--profile", "quick", "--seed", str(SEED), "--guarantee", guarantee,
                              "--workdir", str(tmp_path)])
    code = chaos.run(args, kafka=kafka)
    output = capsys.readouterr().out
    with capsys.disabled():  # the progress lines, for the log of the test run
        print("\n" + output)
    last = output.strip().splitlines()[-1]
    match = FINAL_LINE.match(last)
    assert match, f"the last line is not the machine-readable verdict: {last!r}"
    return code, match.groupdict(), output


def test_quick_profile_is_exactly_once_through_every_disruption(kafka, tmp_path, capsys):
    code, result, output = run_quick_profile(kafka, tmp_path, capsys, "exactly-once")
    assert (result["seed"], result["guarantee"]) == (str(SEED), "exactly-once")
    assert int(result["records"]) == chaos.PROFILES["quick"].events
    assert int(result["kills"]) >= 5, output
    assert int(result["faults"]) == len(faults.POINTS), output
    if kafka.restart_broker is not None:  # the env provider cannot restart a broker it did not start
        assert int(result["broker_restarts"]) >= 1, output
    assert (result["lost"], result["duplicated"], result["dead_letter_ok"]) == ("0", "0", "true"), output
    assert code == 0, output


def test_the_same_chaos_duplicates_with_the_at_least_once_sink(kafka, tmp_path, capsys):
    code, result, output = run_quick_profile(kafka, tmp_path, capsys, "at-least-once")
    assert code == 0, output  # the run completed; the verdict is the point
    assert int(result["faults"]) == len(faults.POINTS), output
    assert int(result["duplicated"]) > 0, "the at-least-once sink published no duplicate: the check has no teeth"
