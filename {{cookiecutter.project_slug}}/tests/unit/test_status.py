"""`status --check`: when the job counts as stuck or falling behind (the verdict alone; the
integration test in test_pipeline.py runs the command against a real job)."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.runtime.status import problems


def status(age: float | None, lag: int | None) -> dict:
    return {"last_batch_age_seconds": age, "lag_total": lag, "lag_error": "broker down" if lag is None else None}


@pytest.mark.parametrize(
    ("age", "lag", "expected"),
    [
        (5.0, 0, []),  # caught up
        (3600.0, 0, []),  # idle: no input, so no batch is due
        (5.0, 10, []),  # working on it
        (120.0, 10, ["stuck: input waits and the last batch was committed 120s ago (limit 60s)"]),
        (None, 10, ["stuck: input waits and no batch was ever committed"]),
        (5.0, 5000, ["falling behind: 5000 records wait (limit 1000)"]),
        (5.0, None, ["input lag unknown: broker down"]),
    ],
)
def test_stuck_means_input_waits_and_no_batch_came(age, lag, expected):
    found = problems(status(age, lag), max_batch_age=60, max_lag=1000)
    if lag is None:  # no lag figure: unhealthy, and the batch age cannot clear it
        assert found[0] == expected[0]
    else:
        assert found == expected
