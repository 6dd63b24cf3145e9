"""The failure model (failures.py): every exception class of the job declares what the job does
when it meets it, Kafka's errors are judged by their code, and the sink hands the runner the
exception itself, never text to search."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import SimpleNamespace
from typing import ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }} import failures, waiting
from {{ cookiecutter.package_name }}.failures import ConfigError, JobFailure, Outcome, verdict
from {{ cookiecutter.package_name }}.sink import invariants, shard_transaction
from {{ cookiecutter.package_name }}.waiting import Tolerance


def exception_classes() -> list[type[BaseException]]:
    """Every exception class the job's package defines (test_troubleshooting.py takes them too)."""
    found = []
    package = {{ cookiecutter.package_name }}
    for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        if module.name.endswith("__main__"):
            continue
        for _, cls in inspect.getmembers(importlib.import_module(module.name), inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.name and cls is not JobFailure:
                found.append(cls)
    return found


def test_every_exception_class_of_the_job_declares_its_outcome():
    classes = exception_classes()
    assert len(classes) > 15, classes  # the walk found the package's exceptions
    undeclared = [f"{cls.__module__}.{cls.__name__}" for cls in classes
                  if not issubclass(cls, JobFailure) or not isinstance(getattr(cls, "outcome", None), Outcome)]
    assert not undeclared, f"exceptions without a declared outcome (failures.JobFailure): {undeclared}"
    # A stop for good names the option to fix (ConfigError names its own, per instance).
    nameless = [cls.__name__ for cls in classes if cls.outcome is Outcome.FIX_SETTING and not cls.option
                and not issubclass(cls, ConfigError) and "option" not in inspect.signature(cls.__init__).parameters]
    assert not nameless, f"FIX_SETTING outcomes that name no option: {nameless}"


@pytest.mark.parametrize(("code", "fatal", "outcome", "option"), [
    (KafkaError.PRODUCER_FENCED, True, Outcome.TAKEN_OVER, None),
    (KafkaError._FENCED, True, Outcome.TAKEN_OVER, None),
    (KafkaError.INVALID_PRODUCER_EPOCH, True, Outcome.TAKEN_OVER, None),
    (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, True, Outcome.FIX_SETTING, "transactional_id_prefix"),
    (KafkaError.TOPIC_AUTHORIZATION_FAILED, False, Outcome.FIX_SETTING, "kafka"),
    (KafkaError.MSG_SIZE_TOO_LARGE, False, Outcome.FIX_SETTING, "kafka.message.max.bytes"),
    (KafkaError._TIMED_OUT, False, Outcome.RIDE_OUT, None),  # "Timed out waiting for controller"
    (KafkaError.COORDINATOR_NOT_AVAILABLE, False, Outcome.RIDE_OUT, None),
    (KafkaError.NOT_ENOUGH_REPLICAS, False, Outcome.RIDE_OUT, None),
    (KafkaError.INVALID_TXN_STATE, True, Outcome.RETRY, None),  # fatal, but no fence: a new producer can go on
    (KafkaError.UNKNOWN, False, Outcome.RETRY, None),
])
def test_kafka_errors_are_judged_by_their_code(code, fatal, outcome, option):
    judged = verdict(KafkaException(KafkaError(code, "from the broker", fatal=fatal)))
    assert (judged.outcome, judged.option) == (outcome, option), judged
    assert KafkaError(code).name() in judged.line


class _Settings:
    client: ClassVar[dict[str, str]] = {"sasl.username": "job"}
    transactional_id_prefix, sink_id = "job", "sink"

    def transactional_id(self, shard: int) -> str:
        return f"job-sink-{shard}"


@pytest.mark.parametrize(("code", "fatal", "raised", "outcome"), [
    (KafkaError._FENCED, True, shard_transaction.ProducerFenced, Outcome.TAKEN_OVER),
    (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, True, shard_transaction.TransactionalIdRefused,
     Outcome.FIX_SETTING),
    (KafkaError.INVALID_TXN_STATE, True, shard_transaction.KafkaFatal, Outcome.RETRY),
    (KafkaError._TIMED_OUT, False, shard_transaction.CommitFailed, Outcome.RIDE_OUT),
    (KafkaError.UNKNOWN, False, shard_transaction.CommitFailed, Outcome.RETRY),
])
def test_a_failed_transaction_becomes_the_sinks_own_exception_with_the_codes_outcome(code, fatal, raised, outcome):
    failure = shard_transaction.failed_transaction(_Settings(), 0, 7, KafkaError(code, "x", fatal=fatal))  # type: ignore[arg-type]
    assert type(failure) is raised and verdict(failure).outcome is outcome, verdict(failure)
    assert any(name in str(failure) for name in ("job-sink-0", "batch 7", "User:job may not WRITE")), failure


def test_a_refused_record_stops_naming_the_limit_instead_of_being_retried():
    judged = verdict(shard_transaction.RecordRejected("a record for 'counts' was refused"))
    assert (judged.outcome, judged.option) == (Outcome.FIX_SETTING, "kafka.message.max.bytes")


def test_the_checkpoint_behind_the_output_stops_naming_checkpoint_location():
    judged = verdict(invariants.CheckpointBehindOutput("batch 3 is planned by ..."))
    assert (judged.outcome, judged.option, judged.message) == (Outcome.FIX_SETTING, "checkpoint_location",
                                                               "batch 3 is planned by ...")


def test_a_time_out_is_waited_out_and_a_job_failure_that_is_one_keeps_its_own_outcome():
    assert verdict(TimeoutError()).outcome is Outcome.RIDE_OUT  # an admin future nobody answered in time
    from {{ cookiecutter.package_name }}.sink.marker import MarkersUndecided

    assert verdict(MarkersUndecided("held open")).outcome is Outcome.RETRY


def test_anything_else_is_a_failure_for_the_restart_strategy():
    judged = verdict(ZeroDivisionError("division by zero"))
    assert judged.outcome is Outcome.RETRY and judged.line == "ZeroDivisionError: division by zero"


def test_the_sink_hands_over_the_exception_its_batch_failed_with():
    from {{ cookiecutter.package_name }}.sink import KafkaSink
    from {{ cookiecutter.package_name }}.sink.settings import SinkSettings

    fenced = shard_transaction.ProducerFenced("transactional id job-sink-0: fenced")

    class Output:  # the batch's records, whose publishing fails as a fenced producer would
        def mapInArrow(self, *_):
            raise fenced

    settings = SinkSettings(bootstrap_servers="127.0.0.1:1", checkpoint="unused", sink_id="sink",
                            transactional_id_prefix="job", marker_topic="markers", shards=1, commit_timeout_seconds=1,
                            client={})
    sink = KafkaSink(settings, "at-least-once")
    with pytest.raises(shard_transaction.ProducerFenced):
        sink(Output(), 3)  # type: ignore[arg-type]
    assert sink.take_failure() is fenced and sink.take_failure() is None


def test_a_tolerance_waits_out_an_outage_then_gives_up_in_one_exception(monkeypatch):
    clock = [0.0]
    # A clock of waiting.py's own: patching the time module's would let any other thread's sleep
    # (a client's, Spark's) move this test's clock.
    monkeypatch.setattr(waiting, "time", SimpleNamespace(
        monotonic=lambda: clock[0], sleep=lambda seconds: clock.__setitem__(0, clock[0] + seconds)))
    attempts = []

    def timed_out() -> None:
        attempts.append(clock[0])
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out waiting for controller"))

    with pytest.raises(failures.StoppedForGood, match=r"Timed out waiting for controller \(_TIMED_OUT\) after 12s"):
        Tolerance("waiting", 10).run(timed_out, lambda judged, waited: failures.StoppedForGood(
            f"{judged.message} after {waited:.0f}s"), retry_pause=2.0)
    assert attempts == [0, 2, 4, 6, 8, 10, 12]

    answers = iter([KafkaException(KafkaError(KafkaError._TRANSPORT, "down")), None])

    def comes_back() -> str:
        if (error := next(answers)) is not None:
            raise error
        return "answered"

    assert Tolerance("waiting", 10).run(comes_back, lambda *_: AssertionError("not past")) == "answered"
    with pytest.raises(ZeroDivisionError):  # not an outage: raised at once
        Tolerance("waiting", 10).run(lambda: 1 / 0, lambda *_: AssertionError("not waited"))


def _task_failures() -> list[JobFailure]:
    """One of each failure a publishing task can meet, made as the sink makes it."""
    from {{ cookiecutter.package_name }}.sink.faults import InjectedFault
    from {{ cookiecutter.package_name }}.sink.marker import MarkersUndecided
    from {{ cookiecutter.package_name }}.sink.settings import SinkSettings
    from {{ cookiecutter.package_name }}.storage.layout_versions import UnknownFormat

    settings = SinkSettings(bootstrap_servers="b:9092", checkpoint="/c", sink_id="job", transactional_id_prefix="p",
                            marker_topic="markers", shards=4, commit_timeout_seconds=60, client={})
    return [
        shard_transaction.failed_transaction(settings, 2, 7, KafkaError(KafkaError._FENCED, "fenced", fatal=True)),
        shard_transaction.CommitFailed("shard 2: not the leader", Outcome.RIDE_OUT),
        shard_transaction.RecordRejected("a record for 'counts' was refused"),
        shard_transaction.RecomputedDifferently("batch 7, shard 2: 9 records where the batch was prepared with 10"),
        shard_transaction.KafkaFatal("transactional id p-job-2: the producer cannot go on"),
        shard_transaction.TransactionalIdRefused.of(settings),
        invariants.checkpoint_behind_output(settings, 7, 9, 2, "Shard 2's publishing task published nothing."),
        MarkersUndecided("an open transaction on 'markers' kept newer markers from being read"),
        UnknownFormat("markers/2", 9, 2),
        InjectedFault("fault injection: before_kafka_commit in batch 7"),
    ]


@pytest.mark.parametrize("failure", _task_failures(), ids=lambda failure: type(failure).__name__)
def test_a_publishing_tasks_failure_reaches_the_driver_as_itself(failure):
    """A publishing task answers with a row (publishing_tasks.ShardResult), never an exception; the
    failure it met travels in it as a value, and the driver raises that: the same class, message,
    outcome and option, which the runner judges as it would have on the driver. A fence is the
    same wherever it is met: the job stops."""
    from {{ cookiecutter.package_name }}.sink.publishing_tasks import ShardResult

    row = ShardResult(2, {}, failure, 0.5).as_batch().to_pylist()[0]
    arrived = ShardResult.of_row(row).failure
    assert type(arrived) is type(failure) and str(arrived) == str(failure)
    assert (verdict(arrived).outcome, verdict(arrived).option) == (verdict(failure).outcome, verdict(failure).option)
    if isinstance(failure, shard_transaction.ProducerFenced):
        assert verdict(arrived).outcome is Outcome.TAKEN_OVER


def test_a_call_refused_for_an_earlier_fatal_error_is_judged_by_that_error():
    """A produce refused with `_FATAL` after the client saw a fence: the transactional API names
    the fence (shard_transaction.fatal_cause), and the shard stops fenced, never retried."""
    from {{ cookiecutter.package_name }}.sink.shard_transaction import fatal_cause

    class FencedClient:
        def abort_transaction(self, timeout: float) -> None:
            raise KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))

    refused = KafkaError(KafkaError._FATAL, "Unable to produce message: Local: Fatal error")
    cause = fatal_cause(FencedClient(), refused)  # type: ignore[arg-type]
    assert cause.code() == KafkaError._FENCED and failures.kafka_outcome(cause)[0] is Outcome.TAKEN_OVER
    assert failures.kafka_outcome(refused)[0] is Outcome.CANNOT_CONTINUE  # whatever the cause, never a retry
    assert fatal_cause(FencedClient(), KafkaError(KafkaError._TRANSPORT)).code() == KafkaError._TRANSPORT  # type: ignore[arg-type]
