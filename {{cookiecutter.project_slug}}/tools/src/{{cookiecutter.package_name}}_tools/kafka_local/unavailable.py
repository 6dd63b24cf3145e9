"""No Kafka for the tests, the demo or `kafka up`: why, and the ways to provide one."""

from __future__ import annotations

from {{ cookiecutter.package_name }}.failures import JobFailure, Outcome

HOW_TO_PROVIDE_KAFKA = (
    "Provide a Kafka in one of these ways: set KAFKA_BOOTSTRAP_SERVERS=host:port to use a "
    "running cluster; run a Docker engine (testcontainers starts Kafka in it); or install "
    "Java 17 and Maven (apt-get install openjdk-17-jre-headless maven) so that a local "
    "broker can be started from Apache Kafka's jars."
)


class KafkaUnavailable(JobFailure, RuntimeError):
    """No Kafka broker could be provided (tests, demo, `kafka up`); the message says why and how to fix it."""

    outcome = Outcome.FIX_SETTING
    option = "KAFKA_BOOTSTRAP_SERVERS"

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}\n{HOW_TO_PROVIDE_KAFKA}")
        self.reason = reason
