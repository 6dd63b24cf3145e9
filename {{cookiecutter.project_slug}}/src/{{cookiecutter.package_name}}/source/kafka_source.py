"""A Spark streaming source over confluent-kafka (Python data source API).

Offsets per partition are kept in Spark's offset log, so a restarted query reads exactly
the ranges it planned before. Reads stop at the last stable offset with `read_committed`,
so aborted and still-open transactions are never read and control records are stepped over.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from .offsets import Offsets, check_not_lost, plan_end

SOURCE_NAME = "kafka_eos_source"
SCHEMA = "topic STRING, partition INT, offset BIGINT, timestamp_ms BIGINT, key BINARY, value BINARY"
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp_ms", pa.int64()), ("key", pa.binary()), ("value", pa.binary()),
])
ROWS_PER_ARROW_BATCH = 20_000
STALL_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    topic: str
    partition: int
    start: int
    end: int
    consumer_config: dict[str, str] = field(default_factory=dict)


class KafkaSource(DataSource):
    """Options: bootstrap.servers, topic, startingOffsets, maxRecordsPerTrigger, failOnDataLoss,
    isolation.level (default read_committed)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema) -> KafkaStreamReader:
        return KafkaStreamReader(dict(self.options))


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, given: dict[str, str]) -> None:
        # Spark hands options over with lower-cased keys: look them up that way.
        options = {key.lower(): value for key, value in given.items()}
        self.topic = options["topic"]
        self.consumer_config = {
            "bootstrap.servers": options["bootstrap.servers"],
            "isolation.level": options.get("isolation.level", "read_committed"),
            "group.id": f"{self.topic}-spark-source",  # never committed: offsets live in the checkpoint
            "enable.auto.commit": "false",
            "enable.partition.eof": "true",
        }
        self.starting_offsets = options.get("startingoffsets", "earliest")
        max_records = options.get("maxrecordspertrigger")
        self.max_records = int(max_records) if max_records else None
        self.fail_on_data_loss = options.get("failondataloss", "true").lower() == "true"
        self._consumer = None

    # -- the driver side: planning ------------------------------------------------------
    def _metadata_consumer(self):
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer({**self.consumer_config, "group.id": f"meta-{uuid.uuid4().hex}"})
        return self._consumer

    def _watermarks(self) -> tuple[Offsets, Offsets]:
        """(earliest, last stable) offset of every partition; new partitions appear here."""
        from confluent_kafka import TopicPartition

        consumer = self._metadata_consumer()
        metadata = consumer.list_topics(self.topic, timeout=30)
        topic = metadata.topics[self.topic]
        if topic.error is not None:
            raise RuntimeError(f"input topic {self.topic!r}: {topic.error}")
        earliest, latest = {}, {}
        for partition in sorted(topic.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=30)
            earliest[str(partition)], latest[str(partition)] = low, high
        return earliest, latest

    def initialOffset(self) -> dict:
        earliest, latest = self._watermarks()
        if self.starting_offsets == "earliest":
            return earliest
        if self.starting_offsets == "latest":
            return latest
        explicit = {str(p): int(o) for p, o in json.loads(self.starting_offsets).items()}
        return {p: explicit.get(p, earliest[p]) for p in earliest}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        earliest, latest = self._watermarks()
        start = check_not_lost({**{p: earliest[p] for p in earliest}, **start}, earliest, self.fail_on_data_loss)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return plan_end(start, latest, max_rows)

    def reportLatestOffset(self) -> dict | None:
        return self._watermarks()[1]

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        earliest, _ = self._watermarks()
        start = check_not_lost(
            {p: start.get(p, earliest.get(p, 0)) for p in end}, earliest, self.fail_on_data_loss
        )
        return [
            KafkaInputPartition(self.topic, int(p), start[p], end[p], self.consumer_config)
            for p in sorted(end, key=int)
            if end[p] > start[p]
        ]

    def commit(self, end: dict) -> None:
        """Offsets are in Spark's checkpoint; nothing is committed to Kafka."""

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- the executor side: reading one partition's range --------------------------------
    def read(self, partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition)


def read_range(partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """Yield the records of [start, end) of one partition as Arrow batches."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(partition.consumer_config)
    consumer.assign([TopicPartition(partition.topic, partition.partition, partition.start)])
    columns: dict[str, list] = {name: [] for name in ARROW_SCHEMA.names}
    last_progress = time.monotonic()
    done = False
    try:
        while not done:
            messages = consumer.consume(num_messages=5000, timeout=1.0)
            if messages:
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > STALL_TIMEOUT_SECONDS:
                raise TimeoutError(
                    f"{partition.topic}[{partition.partition}]: no progress towards offset {partition.end} "
                    f"for {STALL_TIMEOUT_SECONDS:.0f}s"
                )
            for message in messages:
                error = message.error()
                if error is not None:
                    # End of partition: the last stable offset, which is >= the planned end.
                    if error.code() == KafkaError._PARTITION_EOF:
                        done = True
                        break
                    raise RuntimeError(f"{partition.topic}[{partition.partition}]: {error}")
                if message.offset() >= partition.end:
                    done = True
                    break
                columns["topic"].append(partition.topic)
                columns["partition"].append(partition.partition)
                columns["offset"].append(message.offset())
                columns["timestamp_ms"].append(message.timestamp()[1])
                columns["key"].append(message.key())
                columns["value"].append(message.value())
                if message.offset() == partition.end - 1:
                    done = True
                    break
            if len(columns["offset"]) >= ROWS_PER_ARROW_BATCH:
                yield _to_batch(columns)
                columns = {name: [] for name in ARROW_SCHEMA.names}
        if columns["offset"]:
            yield _to_batch(columns)
    finally:
        consumer.close()


def _to_batch(columns: dict[str, list]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(columns, schema=ARROW_SCHEMA)
