"""Kafka chores of the tools (tests, chaos, bench, demo): topics made and removed, and a
produce that waits when librdkafka's local queue is full instead of failing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the client is imported when used: the CLI builds its parser without it
    from confluent_kafka import Producer


def create_topics(bootstrap_servers: str, partitions: Mapping[str, int | Sequence[Sequence[int]]],
                  config: Mapping[str, str] | None = None, client: Mapping[str, Any] | None = None) -> None:
    """Create each topic with its partition count and the cluster's default replication
    (`default.replication.factor`: 1 on a broker alone, 3 on the local cluster), or with its
    replica assignment: one list of broker ids per partition, the preferred leader first."""
    from confluent_kafka.admin import AdminClient, NewTopic

    settings = dict(config or {})

    def new_topic(name: str, layout: int | Sequence[Sequence[int]]) -> NewTopic:
        if isinstance(layout, int):
            return NewTopic(name, layout, -1, config=settings)
        return NewTopic(name, len(layout), replica_assignment=[list(r) for r in layout], config=settings)

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, **(client or {})})
    futures = admin.create_topics([new_topic(name, layout) for name, layout in partitions.items()])
    for future in futures.values():
        future.result(timeout=60)


def grow_topic(bootstrap_servers: str, topic: str, more: int = 2) -> int:
    """Add `more` partitions to `topic`; returns its partition count now."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 2})
    count = len(admin.list_topics(topic, timeout=30).topics[topic].partitions) + more
    admin.create_partitions([NewPartitions(topic, count)])[topic].result(timeout=60)
    return count


def delete_topics(bootstrap_servers: str, names: list[str]) -> None:
    """Delete the topics; one that is already gone is not an error."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    for future in admin.delete_topics(names, operation_timeout=30).values():
        with contextlib.suppress(KafkaException):
            future.result(timeout=60)


def produce(producer: Producer, topic: str, value: bytes | None, key: bytes | None = None,
            partition: int | None = None, on_delivery: Callable | None = None,
            headers: list[tuple[str, bytes | None]] | None = None) -> None:
    """Queue one record; while the local queue is full, serve deliveries and try again."""
    kwargs: dict[str, Any] = {"key": key, "on_delivery": on_delivery, "headers": headers}
    if partition is not None:
        kwargs["partition"] = partition
    while True:
        try:
            producer.produce(topic, value=value, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)
