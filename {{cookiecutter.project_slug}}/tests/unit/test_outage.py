"""The outage tolerance's decisions (outage.py), with Kafka's answers scripted; a real broker
killed and restarted under a running job is tests/integration/test_broker_outage.py."""

from __future__ import annotations

import threading

import pytest

from {{ cookiecutter.package_name }}.config import JobConfig
from {{ cookiecutter.package_name }}.failures import FailureVerdict, KafkaUnreachable, Outcome
from {{ cookiecutter.package_name }}.supervision import outage


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


# Failures as the runner hands them over: judged already (failures.verdict), by type, not by text.
BUG = FailureVerdict(Outcome.RETRY, "ArithmeticException: / by zero")
TIMED_OUT = FailureVerdict(Outcome.RIDE_OUT, "Kafka: Timed out waiting for controller (_TIMED_OUT)")


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    """Kafka answers as `answers` says, one answer per probe; waiting advances the clock."""
    clock = Clock()
    answers: list[bool] = []
    monkeypatch.setattr(outage.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(outage, "kafka_reachable", lambda config: answers.pop(0))

    class Stop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            clock.now += timeout or 0
            return False

    tolerance = outage.OutageTolerance(JobConfig(kafka_outage_tolerance_seconds=30), Stop())
    return tolerance, answers, clock


def test_a_failure_while_kafka_answers_that_is_no_outage_counts(scripted):
    tolerance, answers, _ = scripted
    answers += [True]
    assert not tolerance.ride_out(BUG)


def test_a_failure_during_an_outage_that_ends_in_time_does_not_count(scripted):
    tolerance, answers, clock = scripted
    answers += [False] * 10 + [True]
    assert tolerance.ride_out(BUG)
    assert clock.now - 1000 == pytest.approx(10)  # it waited for Kafka, a second at a time


def test_an_outage_past_the_tolerance_counts(scripted):
    tolerance, answers, _ = scripted
    answers += [False] * 40
    assert not tolerance.ride_out(BUG)


def test_a_timeout_while_kafka_answers_counts_once_the_tolerance_is_spent(scripted):
    tolerance, answers, clock = scripted
    answers += [True, True]
    assert tolerance.ride_out(TIMED_OUT)  # within the tolerance: a pause, then again
    clock.now += 60
    assert not tolerance.ride_out(TIMED_OUT)  # no batch completed since: spent
    tolerance.batch_completed()
    answers += [True]
    assert tolerance.ride_out(TIMED_OUT)


def test_a_long_trigger_asks_kafka_and_gives_up_past_the_tolerance(scripted):
    tolerance, answers, clock = scripted
    tolerance.watch(2.0)  # a short trigger: Kafka is not asked (no answer is scripted)
    answers += [False, False, True]
    tolerance.watch(6.0)
    clock.now += 10
    tolerance.watch(16.0)
    clock.now += 10
    tolerance.watch(26.0)  # answers again: the batch goes on, the outage is over
    assert tolerance.since is None
    answers += [False, False]
    clock.now += 10
    tolerance.watch(36.0)
    clock.now += 31
    with pytest.raises(KafkaUnreachable, match="past kafka_outage_tolerance_seconds"):
        tolerance.watch(67.0)


def test_no_tolerance_means_every_failure_counts(scripted):
    _, answers, _ = scripted
    off = outage.OutageTolerance(JobConfig(kafka_outage_tolerance_seconds=0), threading.Event())
    assert not off.ride_out(TIMED_OUT)
    assert answers == []  # Kafka was not even asked
