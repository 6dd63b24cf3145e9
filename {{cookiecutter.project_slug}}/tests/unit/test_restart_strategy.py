from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }} import failures
from {{ cookiecutter.package_name }}.supervision.runner import RestartStrategy, StoppedForGood, query_failure_ending


def strategy(kind: str, attempts: int = 2) -> RestartStrategy:
    return RestartStrategy(kind, attempts=attempts, delay=1.0, max_delay=3.0, interval=10.0)


def test_fixed_delay_gives_up_after_the_attempts():
    fixed = strategy("fixed-delay")
    assert [fixed.next_delay(t) for t in (0, 1)] == [1.0, 1.0]
    with pytest.raises(StoppedForGood, match="3 failures"):
        fixed.next_delay(2)


def test_exponential_backoff_doubles_up_to_the_maximum():
    backoff = strategy("exponential-backoff", attempts=5)
    assert [backoff.next_delay(t) for t in range(4)] == [1.0, 2.0, 3.0, 3.0]


def test_failure_rate_counts_only_recent_failures():
    rate = strategy("failure-rate")
    assert rate.next_delay(0) == 1.0
    assert rate.next_delay(5) == 1.0
    assert rate.next_delay(20) == 1.0  # the failure at 0 is outside the 10 s window
    with pytest.raises(StoppedForGood, match="within 10s"):
        rate.next_delay(21)
        rate.next_delay(22)


def test_none_never_restarts():
    with pytest.raises(StoppedForGood):
        strategy("none").next_delay(0)


@pytest.mark.parametrize("kind", ["fixed-delay", "exponential-backoff"])
def test_a_healthy_period_resets_the_budget(kind):
    restarts = strategy(kind, attempts=2)  # interval 10 s
    assert [restarts.next_delay(t) for t in (0, 1)] == [1.0, 2.0 if kind != "fixed-delay" else 1.0]
    assert restarts.next_delay(20) == 1.0, "11 s healthy since the last failure: a fresh budget"
    restarts.next_delay(21)
    with pytest.raises(StoppedForGood):
        restarts.next_delay(22)


def test_a_failure_met_while_the_checkpoints_store_is_down_goes_to_the_restart_strategy():
    """The batch failed because the checkpoint's store does not answer; the check for a newer
    driver then cannot read the heartbeat either. The restart strategy decides, no traceback
    ends the job (the cluster's chaos run met it: the S3 server killed during a batch)."""
    def unreachable() -> str | None:
        raise OSError("When getting information for key 'driver-heartbeat.json': Could not connect to server")

    retried = failures.verdict(RuntimeError("the sink log's write failed"))
    assert retried.outcome is failures.Outcome.RETRY
    assert query_failure_ending(retried, unreachable) is None
    assert isinstance(query_failure_ending(retried, lambda: "a newer driver runs"), failures.TakenOver)
