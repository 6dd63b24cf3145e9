"""The user's Kafka client settings (the `[kafka]` table: security.protocol, sasl.*, ssl.*,
client.id ...) for every client of confluent-kafka the job and its tools make (librdkafka's
names, as written); and what every read of the input through Spark's Kafka source shares
(spark_source_options), the same settings in the Java client's names (java_client.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..java_client import java_client_options

if TYPE_CHECKING:  # the `config` command must not import the Kafka client (test_layout.py)
    from confluent_kafka import KafkaError

    from ..config import JobConfig

# A source task whose range ends at a transaction marker (every batch that catches up with a
# transactional producer) waits this long for records that never come: the Java client's 500 ms
# default adds up to seconds per batch over many partitions. Tasks read known ranges, so a short
# wait costs nothing else.
FETCH_MAX_WAIT_MS = 20  # for Spark's Kafka reader: the stream and the dead letters' read-back



def spark_source_options(config: JobConfig) -> dict[str, str]:
    """The options of Spark's Kafka source every read of the input takes, the stream's and a
    batch's range read again (pipeline/input_range.py): the [kafka] settings, the brokers, only
    committed records, what lost data does, the fetch wait."""
    return {**java_client_options(config.kafka),
            "kafka.bootstrap.servers": config.bootstrap_servers,
            "kafka.isolation.level": "read_committed",
            "failOnDataLoss": str(config.fail_on_data_loss).lower(),
            "kafka.fetch.max.wait.ms": str(FETCH_MAX_WAIT_MS)}


# What confluent-kafka takes as a client's configuration (callbacks, e.g. error_cb, among the values).
ClientConfig = dict[str, Any]


def librdkafka_config(bootstrap_servers: str, settings: Mapping[str, str] | None = None,
                      job_settings: Mapping[str, object] | None = None) -> ClientConfig:
    """For confluent-kafka: the user's settings, then what the job sets itself (which wins).
    librdkafka logs every refused connection, several a second for each broker; the job says what
    Kafka's state means in lines of its own, so its clients keep to critical lines (`log_level`
    2), unless `[kafka]` asks for more."""
    return {"log_level": 2, **(settings or {}), "bootstrap.servers": bootstrap_servers, **(job_settings or {})}


def cluster_topics(bootstrap_servers: str, settings: Mapping[str, str] | None = None,
                   timeout: float = 10.0) -> set[str]:
    """The cluster's topic names; a ConfigError naming `bootstrap_servers` when no broker answers
    within `timeout` (refused, unknown host, TLS or SASL refused: the reason is in the line)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from ..failures import ConfigError

    errors: list[str] = []
    admin = AdminClient(librdkafka_config(bootstrap_servers, settings, {
        "socket.connection.setup.timeout.ms": 5000, "error_cb": lambda error: errors.append(error.str())}))
    try:
        return set(admin.list_topics(timeout=timeout).topics)
    except KafkaException as error:
        reason = errors[-1] if errors else error.args[0].str()
        raise ConfigError("bootstrap_servers", f"Kafka at {bootstrap_servers} did not answer within {timeout:.0f}s "
                                               f"({reason}); check the address and the [kafka] client settings"
                          ) from None


def quiet_client_logs(name: str, every_seconds: float = 30.0) -> dict[str, object]:
    """For a long-lived librdkafka client of the job: its errors as one log line per kind every
    `every_seconds` (through error_cb, served while the client works), not librdkafka's own
    stderr lines, several a second for each broker while one is down. Its critical lines go
    through the job's logging too (`logger`: served when the client is polled, in the job's
    format, JSON included), never straight to stderr from librdkafka's threads, where they
    could land after the job's last line."""
    logger = logging.getLogger(name)
    last: dict[int, float] = {}

    def on_error(error: KafkaError) -> None:
        now = time.monotonic()
        if now - last.get(error.code(), -every_seconds) >= every_seconds:
            last[error.code()] = now
            logger.warning("Kafka client: %s", error.str())

    callback: Callable[[KafkaError], None] = on_error
    return {"log_level": 2, "error_cb": callback, "logger": logger}
