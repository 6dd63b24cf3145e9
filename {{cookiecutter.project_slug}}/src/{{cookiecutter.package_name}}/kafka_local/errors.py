"""The one error every Kafka provider raises when it cannot give a broker."""

HOW_TO_PROVIDE = (
    "Provide a Kafka in one of these ways: set KAFKA_BOOTSTRAP_SERVERS=host:port to use a "
    "running cluster; run a Docker engine (testcontainers starts Kafka in it); or install "
    "Java 17 and Maven (apt-get install openjdk-17-jre-headless maven) so that a local "
    "broker can be started from Apache Kafka's jars."
)


class KafkaUnavailable(RuntimeError):
    """No Kafka broker could be provided; the message says why and how to fix it."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}\n{HOW_TO_PROVIDE}")
