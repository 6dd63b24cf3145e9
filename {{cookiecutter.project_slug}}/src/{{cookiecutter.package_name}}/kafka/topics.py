"""Create the job's topics: input, output (or the routed ones) and dead-letter (the sink creates its
marker topic)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ..config import JobConfig
from .client import cluster_topics, librdkafka_config


def create_topics(config: JobConfig, partitions: int) -> list[str]:
    cluster_topics(config.bootstrap_servers, config.kafka)  # one line naming bootstrap_servers if it does not answer
    admin = AdminClient(librdkafka_config(config.bootstrap_servers, config.kafka))
    names = [config.input_topic, *config.answer_topics, config.dead_letter_topic]
    futures = admin.create_topics([NewTopic(name, partitions, -1) for name in names])
    lines = []
    for name, future in futures.items():
        try:
            future.result(timeout=30)
            lines.append(f"created topic {name} ({partitions} partitions)")
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            lines.append(f"topic {name} exists")
    return lines
