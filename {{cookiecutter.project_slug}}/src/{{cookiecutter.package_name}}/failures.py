"""What a failure does. Every exception the job raises declares here, by its class, what the job
does when it meets it (`Outcome`); Kafka's errors are mapped by their code in one table, Spark's
by the Java exception's type or the error condition it carries. The runner acts on the
`FailureVerdict` alone: no exception name or message is searched for.

One light module: no PySpark, no Kafka client at import (`config` and `status` start fast).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any, ClassVar

log = logging.getLogger(__name__)


class Outcome(StrEnum):
    RETRY = "retry"  # the batch failed: the restart strategy restarts the query after its delay
    RIDE_OUT = "ride out"  # Kafka is in the way for now: waited out within the tolerance, not counted
    FIX_SETTING = "fix setting"  # a setting must change: stop for good naming the option (exit 2)
    TAKEN_OVER = "taken over"  # another instance took over the sink: stop for good (exit 1)
    CANNOT_CONTINUE = "cannot continue"  # no restart can help, no setting names the fix: stop for good (exit 1)
    ASKED_TO_STOP = "asked to stop"  # the job was asked to stop: not a failure
    # The input holds a schema id the query's plan has no writer schema for: build the query again
    # at once (the registry gives the id's schema), not counted by the restart strategy.
    REBUILD = "rebuild"


class JobFailure(Exception):
    """The base of the job's own exceptions: each class declares its outcome (and, for
    FIX_SETTING, the option to fix). `tests/unit/test_failures.py` checks every exception class of
    the package does."""

    outcome: ClassVar[Outcome]
    option: ClassVar[str | None] = None

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as itself, whatever its class's __init__ takes: a publishing task's failure
        # reaches the driver as the value it was (class, message, outcome), never as text.
        return _rebuilt, (type(self), self.args, dict(self.__dict__))


def _rebuilt(cls: type[JobFailure], args: tuple[Any, ...], state: dict[str, Any]) -> JobFailure:
    failure = cls.__new__(cls)
    failure.args = args
    failure.__dict__.update(state)
    return failure


class ConfigError(JobFailure, ValueError):
    """A bad configuration value; the message starts with the option's name."""

    outcome = Outcome.FIX_SETTING

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"configuration option '{option}': {problem}")
        self.option = option  # type: ignore[misc]  # the instance names its own option
        self.problem = problem


class StoppedForGood(JobFailure, RuntimeError):
    """The job stops and no restart follows: the restart strategy allows no more, or Kafka's
    outage at start-up outlasted its tolerance; the two below for reasons of their own."""

    outcome = Outcome.CANNOT_CONTINUE


class TakenOver(StoppedForGood):
    """Another job (or a newer instance of this one) took over the sink's transactional ids.
    Restarting would fence it in turn, and the two would take the sink from each other for as
    long as both run: this job stops instead, whatever the restart strategy."""

    outcome = Outcome.TAKEN_OVER


class CannotContinue(StoppedForGood):
    """The job met something no restart can fix (a record of the sink in a layout this version
    does not read, a heartbeat it cannot keep): it stops, whatever the restart strategy."""

    outcome = Outcome.CANNOT_CONTINUE


class AnswerNameClash(JobFailure, ValueError):
    """pipeline/query.py names a column of its answer as one the sink's changes carry, or two
    alike: the output would lose one of them. The code must change; no restart or setting helps."""

    outcome = Outcome.CANNOT_CONTINUE


class AnswerNotMergeable(JobFailure, ValueError):
    """pipeline/query.py's answer holds what its state cannot keep as values that merge (not one
    of pipeline/aggregates.py's, or over a field it cannot read): a savepoint, a state TTL or a
    restore would lose it. The code must change; no restart or setting helps."""

    outcome = Outcome.CANNOT_CONTINUE


class KafkaUnreachable(JobFailure, RuntimeError):
    """Kafka did not answer for longer than kafka_outage_tolerance_seconds: a failure for the restart strategy."""

    outcome = Outcome.RETRY


class SchemaRegistryUnreachable(JobFailure, RuntimeError):
    """The schema registry did not answer (refused, timed out, or a 5xx): waited out within
    schema_registry_tolerance_seconds, then the start fails naming the option."""

    outcome = Outcome.RIDE_OUT
    option = "schema_registry.url"


class KafkaFailure(JobFailure, RuntimeError):
    """A Kafka client's error, with the outcome its code maps to (`kafka_outcome`)."""

    outcome = Outcome.RETRY


class Source(StrEnum):
    """Who raised the failure."""

    JOB = "job"  # one of the job's own exceptions
    KAFKA = "kafka"  # a Kafka client (confluent-kafka)
    SPARK = "spark"  # Spark, with a Java exception behind it
    OTHER = "other"  # anything else: most likely a defect


@dataclass(frozen=True)
class FailureVerdict:
    """What to do about one failure: its outcome, the option to fix (FIX_SETTING), and one line that
    says what happened (the exception's type and the first line of its message)."""

    outcome: Outcome
    line: str
    option: str | None = None
    message: str = ""  # the line without the exception's type (a FIX_SETTING line says it after the option)
    source: Source = Source.OTHER

    def __post_init__(self) -> None:
        if not self.message:
            object.__setattr__(self, "message", self.line)


def verdict(error: BaseException) -> FailureVerdict:
    """The outcome of any exception the job meets: its own (declared by class), a Kafka client's
    (by error code), Spark's (by the Java exception's type and error condition); anything else
    is a failure the restart strategy retries."""
    if isinstance(error, JobFailure):
        # A ConfigError's message without its option: whoever reports it names the option once.
        message = _first_line(error.problem if isinstance(error, ConfigError) else error)
        return FailureVerdict(error.outcome, _line(error), error.option, message, Source.JOB)
    if isinstance(error, TimeoutError):  # a client's future that no answer completed in time
        line = f"{type(error).__name__}: a request got no answer in time {_first_line(error)}"
        return FailureVerdict(Outcome.RIDE_OUT, line.strip())
    kafka_error = _kafka_error(error)
    if kafka_error is not None:
        outcome, option = kafka_outcome(kafka_error)
        return FailureVerdict(outcome, f"Kafka: {kafka_error.str()} ({kafka_error.name()})", option,
                       source=Source.KAFKA)
    # The Java throwable: PySpark's CapturedException keeps it as _origin, py4j's error as java_exception.
    origin = getattr(error, "_origin", None) or getattr(error, "java_exception", None)
    if origin is not None:
        return _spark_verdict(error, origin)
    return FailureVerdict(Outcome.RETRY, _line(error))


def _first_line(error: BaseException | str) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:500] if text else ""


def _line(error: BaseException) -> str:
    return f"{type(error).__name__}: {_first_line(error)}"


def _kafka_error(error: BaseException) -> Any:
    """The KafkaError a confluent-kafka exception carries (KafkaException, or a future's)."""
    if "confluent_kafka" not in sys.modules:  # never imported: no Kafka client raised it
        return None
    from confluent_kafka import KafkaError, KafkaException

    args = getattr(error, "args", ())
    if isinstance(error, KafkaException) and args and isinstance(args[0], KafkaError):
        return args[0]
    return None


@cache
def _kafka_table() -> dict[int, tuple[Outcome, str | None]]:
    """librdkafka's error codes and what each does to the job; a code not here is judged by the
    error's own flags (kafka_outcome)."""
    from confluent_kafka import KafkaError as E

    fenced = (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH, E._FENCED)
    refused = {E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional_id_prefix",
               E.TOPIC_AUTHORIZATION_FAILED: "kafka", E.CLUSTER_AUTHORIZATION_FAILED: "kafka",
               E.GROUP_AUTHORIZATION_FAILED: "kafka", E.SASL_AUTHENTICATION_FAILED: "kafka",
               E._AUTHENTICATION: "kafka", E._SSL: "kafka"}
    too_large = (E.MSG_SIZE_TOO_LARGE, E.INVALID_MSG_SIZE)
    outage = (E._TIMED_OUT, E._MSG_TIMED_OUT, E._TIMED_OUT_QUEUE, E._TRANSPORT, E._ALL_BROKERS_DOWN,
              E._WAIT_COORD, E.REQUEST_TIMED_OUT, E.NETWORK_EXCEPTION, E.LEADER_NOT_AVAILABLE,
              E.NOT_LEADER_FOR_PARTITION, E.BROKER_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE,
              E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_ENOUGH_REPLICAS,
              E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.NOT_CONTROLLER, E.KAFKA_STORAGE_ERROR,
              E.CONCURRENT_TRANSACTIONS)
    table: dict[int, tuple[Outcome, str | None]] = {code: (Outcome.TAKEN_OVER, None) for code in fenced}
    table |= {code: (Outcome.FIX_SETTING, option) for code, option in refused.items()}
    table |= {code: (Outcome.FIX_SETTING, "kafka.message.max.bytes") for code in too_large}
    table |= {code: (Outcome.RIDE_OUT, None) for code in outage}
    # A client that met a fatal error earlier, which it no longer names: it may have been a fence,
    # and a retry would fence the newer instance back (shard_transaction.fatal_cause finds it first).
    table[E._FATAL] = (Outcome.CANNOT_CONTINUE, None)
    return table


def kafka_outcome(error: Any) -> tuple[Outcome, str | None]:
    """A KafkaError's outcome and option: by code (`_kafka_table`), else retried. A fatal error
    whose code is not a fence ends the client that met it, not the job: the restart's new client
    starts afresh (a producer's init_transactions aborts what the old one left open), and one that
    comes back each time ends with the restart strategy."""
    known = _kafka_table().get(error.code())
    if known is not None:
        return known
    return (Outcome.RETRY, None)


# Spark's error conditions that no restart can change: the checkpoint's state was written by
# another version of the query (its key or value schema differs).
_STATE_LAYOUT_CHANGED = frozenset({"STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"})
# The Java Kafka client's exception types (Spark's Kafka source) that say Kafka is in the way for now.
_KAFKA_RETRIABLE = "org.apache.kafka.common.errors.RetriableException"
_KAFKA_AUTHORIZATION = "org.apache.kafka.common.errors.AuthorizationException"
_SPARK_THROWABLE = "org.apache.spark.SparkThrowable"
# A query's own `raise_error` (pipeline/avro_parsing.py: a schema id its plan does not know).
_USER_RAISED = "USER_RAISED_EXCEPTION"
# What such an error's message holds when the query must be built again.
REBUILD_MARK = "rebuild the query: "


def _spark_verdict(error: BaseException, origin: Any) -> FailureVerdict:
    """A failure Spark reports (the source's tasks, the state store): judged by the types along
    the Java exception's chain of causes and by the error conditions they carry."""
    from py4j.java_gateway import is_instance_of
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    line = _line(error)
    cause, seen = origin, 0
    while cause is not None and seen < 20:
        if is_instance_of(gateway, cause, _SPARK_THROWABLE):
            condition = cause.getCondition()
            if condition == _USER_RAISED and REBUILD_MARK in str(cause.getMessage()):
                message = str(cause.getMessage()).split(REBUILD_MARK, 1)[1].splitlines()[0]
                return FailureVerdict(Outcome.REBUILD, f"{REBUILD_MARK}{message}",
                                      message=message.split(" SQLSTATE")[0], source=Source.SPARK)
            if condition in _STATE_LAYOUT_CHANGED:
                return FailureVerdict(Outcome.FIX_SETTING, f"its state was written by another version of the query "
                               f"({condition}: {str(cause.getMessage()).strip().splitlines()[0][:300]}). Run the "
                               "version that wrote it, or start this one on a new checkpoint_location.",
                               "checkpoint_location", source=Source.SPARK)
        if is_instance_of(gateway, cause, _KAFKA_AUTHORIZATION):
            return FailureVerdict(Outcome.FIX_SETTING, f"Kafka refused the source: {cause.getMessage()}", "kafka",
                           source=Source.SPARK)
        if is_instance_of(gateway, cause, _KAFKA_RETRIABLE):
            return FailureVerdict(Outcome.RIDE_OUT, f"{line} ... Kafka: {cause.getClass().getSimpleName()}: "
                           f"{str(cause.getMessage())[:300]}", source=Source.SPARK)
        cause, seen = cause.getCause(), seen + 1
    return FailureVerdict(Outcome.RETRY, line, source=Source.SPARK)
