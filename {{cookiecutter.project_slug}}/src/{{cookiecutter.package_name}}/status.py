"""`status`: the last committed batches with their offsets, the sink log and the input lag."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from . import checkpoint
from .config import JobConfig
from .kafka_client import librdkafka_config
from .sink.sink_log import SinkLog
from .storage import resolve_location


def input_lag(config: JobConfig, committed: dict[str, int]) -> dict[str, int]:
    consumer = Consumer(librdkafka_config(config.bootstrap_servers, config.kafka,
                                          {"group.id": "status", "isolation.level": "read_committed"}))
    try:
        metadata = consumer.list_topics(config.input_topic, timeout=10).topics[config.input_topic]
        lag = {}
        for partition in sorted(metadata.partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(config.input_topic, partition), timeout=10)
            lag[str(partition)] = max(0, high - committed.get(str(partition), 0))
        return lag
    finally:
        consumer.close()


def print_status(config: JobConfig, batches: int = 5) -> None:
    location = resolve_location(config.checkpoint_location)
    committed = checkpoint.committed_batches(location)
    print(f"checkpoint {location}: {len(committed)} committed batches retained, last {committed[-1:] or 'none'}")
    last_offsets: dict[str, int] = {}
    for batch_id in committed[-batches:]:
        last_offsets = checkpoint.input_offsets(location, batch_id, config.input_topic)
        print(f"  batch {batch_id}: source end offsets {last_offsets}")
    if config.exactly_once:
        print(f"sink {config.sink_id!r} ({config.delivery_guarantee}) log:")
        for entry in SinkLog(location, config.sink_id).latest(batches):
            print(f"  batch {entry.batch_id}: {entry.status}, {entry.records} records, "
                  f"transactional ids {entry.transactional_ids}")
    else:  # its tasks produce straight to Kafka: Spark's commit log above is the only record
        print(f"sink {config.sink_id!r} ({config.delivery_guarantee}): no sink log")
    try:
        lag = input_lag(config, last_offsets)
        print(f"input lag per partition of {config.input_topic}: {lag} (total {sum(lag.values())})")
    except Exception as error:  # noqa: BLE001 - status still prints what the checkpoint holds
        print(f"input lag: unavailable ({error})")
