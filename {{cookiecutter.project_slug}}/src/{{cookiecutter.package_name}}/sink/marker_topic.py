"""The marker topic the job creates and checks: one partition (the markers are read in order),
compacted alone (a marker must never expire); one that is otherwise is refused, naming it."""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, NewTopic, ResourceType

from ..failures import JobFailure, Outcome
from ..kafka.client import librdkafka_config
from ..waiting import poll, retry


class MarkerTopicUnfit(JobFailure, ValueError):
    """The marker topic exists but cannot keep the markers safely."""

    outcome = Outcome.FIX_SETTING
    option = "marker_topic"


def ensure_marker_topic(bootstrap_servers: str, topic: str, client: Mapping[str, str] | None = None,
                        replication_factor: int = 0, min_insync_replicas: int = 0) -> None:
    """Create the compacted, single-partition marker topic unless it exists, then check it: one
    partition (the markers are read in order), compaction only (a marker must never expire).
    Replication 0 means min(3, brokers), min.insync.replicas 0 means min(2, replication)."""
    admin = AdminClient(librdkafka_config(bootstrap_servers, client))
    metadata = admin.list_topics(timeout=30)
    if topic not in metadata.topics:
        replicas = replication_factor or min(3, len(metadata.brokers))
        futures = admin.create_topics([NewTopic(topic, 1, replicas, config={
            "cleanup.policy": "compact",
            "min.compaction.lag.ms": "3600000",
            "min.insync.replicas": str(min_insync_replicas or min(2, replicas)),
        })])
        for future in futures.values():
            try:
                future.result(timeout=30)
            except KafkaException as error:
                if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
    _check_fit(admin, topic, _partition_count(admin, topic))


def _partition_count(admin: AdminClient, topic: str, timeout: float = 30.0) -> int:
    """The topic's partitions, once the broker's metadata shows them: just after a topic is
    created, its metadata may still list none (a Kafka topic always has at least one), and
    reading that as "0 partitions" would refuse a fresh marker topic at start-up."""
    def partitions() -> int:
        described = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        return len(described.partitions) if described is not None and described.error is None else 0

    return poll(partitions, lambda count: count > 0, timeout)


def _check_fit(admin: AdminClient, topic: str, partitions: int) -> None:
    problems = []
    if partitions != 1:
        problems.append(f"it has {partitions} partitions, the markers need exactly 1")
    cleanup = _topic_configs(admin, topic)["cleanup.policy"].value or ""
    if {p.strip() for p in cleanup.split(",")} != {"compact"}:
        problems.append(f"cleanup.policy is {cleanup!r}, the markers need 'compact' alone "
                        "(with 'delete' a marker expires and its batches would be published again)")
    if problems:
        raise MarkerTopicUnfit(f"marker topic {topic!r}: " + "; ".join(problems) +
                               ". Point marker_topic at a new topic (the job creates it) or fix this one.")


def _topic_configs(admin: AdminClient, topic: str, timeout: float = 30.0) -> dict[str, ConfigEntry]:
    """The topic's configuration. Just after the topic was created, the broker asked may not
    know it yet (on a cluster, each broker learns of a new topic in its own time): asked again."""
    resource = ConfigResource(ResourceType.TOPIC, topic)

    def unknown_topic(error: Exception) -> bool:
        return isinstance(error, KafkaException) and error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    configs: dict[str, ConfigEntry] = retry(
        lambda: admin.describe_configs([resource])[resource].result(timeout=timeout), unknown_topic, timeout)
    return configs
