"""The errors the command line reports in one line, without a traceback. One light module
(no PySpark, no Kafka client), so that `config` and `status` start fast."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad configuration value; the message starts with the option's name."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"configuration option '{option}': {problem}")
        self.option = option


class GaveUp(RuntimeError):
    """The restart strategy allows no more restarts."""


class Fenced(GaveUp):
    """Another job (or a newer instance of this one) took over the sink's transactional ids.
    Restarting would fence it in turn, and the two would take the sink from each other for as
    long as both run: this job stops instead, whatever the restart strategy."""


class Halted(GaveUp):
    """The job met something no restart can fix (a record of the sink in a layout this version
    does not read, a heartbeat it cannot keep): it stops, whatever the restart strategy."""


HOW_TO_PROVIDE_KAFKA = (
    "Provide a Kafka in one of these ways: set KAFKA_BOOTSTRAP_SERVERS=host:port to use a "
    "running cluster; run a Docker engine (testcontainers starts Kafka in it); or install "
    "Java 17 and Maven (apt-get install openjdk-17-jre-headless maven) so that a local "
    "broker can be started from Apache Kafka's jars."
)


class KafkaUnavailable(RuntimeError):
    """No Kafka broker could be provided (tests, demo, `kafka up`); the message says why and how to fix it."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}\n{HOW_TO_PROVIDE_KAFKA}")
        self.reason = reason


class KafkaUnreachable(RuntimeError):
    """Kafka did not answer for longer than kafka_outage_tolerance_seconds: a failure for the restart strategy."""
