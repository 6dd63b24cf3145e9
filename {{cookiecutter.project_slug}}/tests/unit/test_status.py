"""`status --check`: when the job counts as stuck or falling behind, and how a Kafka outage that
the driver rides out reads (the verdict alone; the integration tests in test_operations.py and
test_broker_outage.py run the command against a real job)."""

from __future__ import annotations

import json
import time

import pytest

from {{ cookiecutter.package_name }}.operations.status import driver_status, problems
from {{ cookiecutter.package_name }}.storage.driver_presence import HEARTBEAT, running_driver

TOLERANCE = 120.0


def status(age: float | None, lag: int | None, driver: dict | None = None) -> dict:
    return {"last_batch_age_seconds": age, "lag_total": lag, "lag_error": "broker down" if lag is None else None,
            "driver": driver, "kafka_outage_tolerance_seconds": TOLERANCE}


@pytest.mark.parametrize(
    ("age", "lag", "expected"),
    [
        (5.0, 0, []),  # caught up
        (3600.0, 0, []),  # idle: no input, so no batch is due
        (5.0, 10, []),  # working on it
        (120.0, 10, ["stuck: input waits and the last batch was committed 120s ago (limit 60s)"]),
        (None, 10, ["stuck: input waits and no batch was ever committed"]),
        (5.0, 5000, ["falling behind: 5000 records wait (limit 1000)"]),
    ],
)
def test_stuck_means_input_waits_and_no_batch_came(age, lag, expected):
    assert problems(status(age, lag), max_batch_age=60, max_lag=1000) == expected


@pytest.mark.parametrize(
    ("driver", "expected"),
    [
        (None, "input lag unknown (broker down) and no driver is running on the checkpoint"),
        ({"kafka_unreachable_seconds": None}, None),  # the driver has not met the outage (idle, or just begun)
        ({"kafka_unreachable_seconds": 90.0}, None),  # waiting it out, within the tolerance
        ({"kafka_unreachable_seconds": 150.0}, "input lag unknown (broker down); the driver has found Kafka "
                                               "unreachable for 150s, past kafka_outage_tolerance_seconds (120)"),
    ],
)
def test_without_a_lag_figure_a_running_driver_within_its_outage_tolerance_is_healthy(driver, expected):
    """However old the last batch: without the lag, idle and stuck look alike."""
    found = problems(status(3600.0, None, driver), max_batch_age=60, max_lag=1000)
    assert found == ([] if expected is None else [expected])


def test_the_outage_the_driver_reports_ages_with_its_heartbeat(tmp_path):
    now = time.time()
    beat = {"host": "h", "pid": 7, "started_at": now - 100, "kafka_unreachable_seconds": 40.0, "at": now - 4}
    (tmp_path / HEARTBEAT).write_text(json.dumps(beat))
    assert running_driver(str(tmp_path), now) is not None
    assert driver_status(str(tmp_path), now) == {"host": "h", "pid": 7, "heartbeat_age_seconds": 4.0,
                                           "kafka_unreachable_seconds": 44.0}
    assert driver_status(str(tmp_path), now + 60) is None  # a stale heartbeat: no driver


def test_a_check_without_a_limit_is_refused_in_one_line(tmp_path):
    """`status --check` alone would pass whatever the job does while Kafka answers: refused before
    anything is read."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "{{ cookiecutter.package_name }}", "status", "--check"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: status --check needs a limit: --max-batch-age S"), result.stderr
    assert "Traceback" not in result.stderr
