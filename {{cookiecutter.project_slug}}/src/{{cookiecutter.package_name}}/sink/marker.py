"""The batch marker: the last batch each commit shard published, written in the same Kafka
transaction as the batch's records, to a compacted topic keyed by sink and shard (it never
expires, unlike consumer-group offsets). Read with read_committed, so "batch N is visible"
and "the marker says N" are one atomic fact."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from ..kafka_client import librdkafka_config

NO_BATCH = -1


def marker_key(sink_id: str, shard: int) -> bytes:
    return f"{sink_id}/{shard}".encode()


def marker_value(sink_id: str, shard: int, batch_id: int, records: int) -> bytes:
    return json.dumps(
        {"sink_id": sink_id, "shard": shard, "batch_id": batch_id, "records": records, "at": time.time()}
    ).encode()


class MarkerTopicUnfit(ValueError):
    """The marker topic exists but cannot keep the markers safely."""


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
    reading that as "0 partitions" refused a fresh marker topic at start-up (seen here)."""
    deadline = time.monotonic() + timeout
    while True:
        described = admin.list_topics(topic, timeout=timeout).topics.get(topic)
        partitions = len(described.partitions) if described is not None and described.error is None else 0
        if partitions or time.monotonic() >= deadline:
            return partitions
        time.sleep(0.2)


def _check_fit(admin: AdminClient, topic: str, partitions: int) -> None:
    problems = []
    if partitions != 1:
        problems.append(f"it has {partitions} partitions, the markers need exactly 1")
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    policy = {p.strip() for p in configs["cleanup.policy"].value.split(",")}
    if policy != {"compact"}:
        problems.append(f"cleanup.policy is {configs['cleanup.policy'].value!r}, the markers need 'compact' alone "
                        "(with 'delete' a marker expires and its batches would be published again)")
    if problems:
        raise MarkerTopicUnfit(f"marker topic {topic!r}: " + "; ".join(problems) +
                               ". Point marker_topic at a new topic (the job creates it) or fix this one.")


class MarkersUndecided(TimeoutError):
    """An open transaction on the marker topic kept newer markers from being read."""


def read_markers(bootstrap_servers: str, topic: str, sink_id: str, client: Mapping[str, str] | None = None,
                 timeout: float = 30.0, settled: bool = True) -> dict[int, int]:
    """The last committed batch of every shard of `sink_id`: {shard: batch id}.

    A read_committed consumer stops at the last stable offset (LSO): an open transaction of
    another producer on this topic (another sink sharing it, a stuck producer) would hide every
    marker committed after it, and this sink would publish those batches again. So, `settled`,
    the markers are read only once the LSO has reached the high watermark seen at the start:
    every marker committed before this call is then readable; if it does not within `timeout`,
    fail. The coordinator reads settled markers after its init_transactions has aborted the
    previous driver's open transaction (which would otherwise hold the LSO back itself); the
    start-up checks, which run before that, read what is stable now (`settled=False`)."""
    config = librdkafka_config(bootstrap_servers, client, {
        "group.id": f"marker-reader-{uuid.uuid4().hex}",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    consumer = Consumer(config)
    # The same client reading uncommitted records sees the high watermark (librdkafka answers a
    # watermark query with the LSO for read_committed, with the high watermark otherwise).
    snapshot = Consumer({**config, "isolation.level": "read_uncommitted"})
    markers: dict[int, int] = {}
    prefix = f"{sink_id}/".encode()
    deadline = time.monotonic() + timeout
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        # A topic created a moment ago may have no leader yet: wait for it, do not read "no markers".
        while metadata is not None and metadata.error is not None and metadata.error.retriable() \
                and time.monotonic() < deadline:
            time.sleep(0.2)
            metadata = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        if metadata is None or (metadata.error is not None
                                and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return markers  # no marker topic yet: nothing was ever published
        if metadata.error is not None:  # anything else would be taken for "nothing published"
            raise KafkaException(metadata.error)
        partition = TopicPartition(topic, 0, 0)
        low, high = snapshot.get_watermark_offsets(partition, timeout=timeout, cached=False)
        if high <= low:
            return markers
        stable = _wait_for_stable_offset(consumer, partition, high, deadline) if settled else high
        if stable < high:
            raise MarkersUndecided(
                f"batch markers in {topic!r}: a transaction of another producer has been open for more "
                f"than {timeout:.0f}s before offset {high} (last stable offset {stable}), and markers "
                "committed after it cannot be read yet. Find the producer (kafka-transactions.sh "
                "list / describe-producers on the marker topic) and let it finish, or abort it.")
        partition.offset = low
        consumer.assign([partition])
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return markers
                raise KafkaException(message.error())
            key = message.key() or b""
            if key.startswith(prefix) and message.value() is not None:
                shard = int(key[len(prefix):])
                markers[shard] = max(markers.get(shard, NO_BATCH), json.loads(message.value())["batch_id"])
        raise TimeoutError(f"reading the batch markers from {topic!r} took longer than {timeout:.0f}s")
    finally:
        consumer.close()
        snapshot.close()


def _wait_for_stable_offset(consumer: Consumer, partition: TopicPartition, target: int, deadline: float) -> int:
    """The partition's LSO once it reached `target`, or the last one seen at the deadline."""
    while True:
        _low, stable = consumer.get_watermark_offsets(partition, timeout=10, cached=False)
        if stable >= target or time.monotonic() >= deadline:
            return stable
        time.sleep(0.2)
