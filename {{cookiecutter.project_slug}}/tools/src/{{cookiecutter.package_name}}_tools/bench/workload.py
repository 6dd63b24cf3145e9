"""The input every contender gets: the same events (same seed) into fresh topics, and a
tail of the output topic that sees what a read_committed consumer sees, and when."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
{%- if cookiecutter.query == "windowed-count" %}

from {{ cookiecutter.package_name }}.config import JobConfig
{%- endif %}

from ..kafka_io import create_topics, delete_topics, produce
from ..sample import SAMPLE_KEYS
from ..value_formats import JSON, Values


@dataclass(frozen=True)
class Keys:
    """The key values of the events and the one the filter drops."""

    values: list[str]
    excluded: str | None
    skewed: bool  # sample.py's skew (1/rank) or every key in turn

    @classmethod
    def of(cls, count: int) -> Keys:
        if count == len(SAMPLE_KEYS):
            return cls(list(SAMPLE_KEYS), SAMPLE_KEYS[3], skewed=True)
        values = [f"k{i:07d}" for i in range(count)]
        return cls(values, values[3] if count > 3 else None, skewed=False)

    def filter_expression(self, key_field: str) -> str:
        return "true" if self.excluded is None else f"`{key_field}` != '{self.excluded}'"

{%- if cookiecutter.query == "windowed-count" %}

@dataclass(frozen=True)
class EventTime:
    """A windowed count's event time: the field the events carry it in (the time they are
    produced), and the windows that name an output record's key."""

    field: str
    window_ms: int

    def output_key(self, key: str, produced_at: float) -> str:
        start = int(produced_at * 1000) // self.window_ms * self.window_ms
        return f"{key}@{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(start // 1000))}"
{%- endif %}


class EventStream:
    """Deterministic events; remembers what each counted output key got and when it was produced."""

    def __init__(self, keys: Keys, key_field: str, seed: int{% if cookiecutter.query == "windowed-count" %},
                 event_time: EventTime | None = None{% endif %}, values: Values = JSON,
                 record_bytes: int = 0) -> None:
        self.keys = keys
        self.key_field = key_field
        self.values = values  # the input's format (value_formats.py)
        self.record_bytes = record_bytes  # a JSON event padded to about this size (a field no query reads)
{%- if cookiecutter.query == "windowed-count" %}
        self.event_time = event_time
{%- endif %}
        self.rng = random.Random(seed)
        self.seq = 0
        self.expected: dict[str, int] = defaultdict(int)
        self.weights = [1.0 / (rank + 1) for rank in range(len(keys.values))] if keys.skewed else None

    def next_keys(self, count: int) -> list[str]:
        if self.weights is not None:
            return self.rng.choices(self.keys.values, self.weights, k=count)
        n = len(self.keys.values)
        return [self.keys.values[(self.seq + i) % n] for i in range(count)]

    def output_key(self, key: str, produced_at: float) -> str:
{%- if cookiecutter.query == "windowed-count" %}
        """The key of the output record that counts this event: the key, or the key and its window."""
        return key if self.event_time is None else self.event_time.output_key(key, produced_at)
{%- else %}
        """The key of the output record that counts this event."""
        return key
{%- endif %}

    def encode(self, key: str, produced_at: float) -> bytes:
        self.seq += 1
        if key != self.keys.excluded:
            self.expected[self.output_key(key, produced_at)] += 1
        event: dict[str, object] = {self.key_field: key, "seq": self.seq, "ts_ms": round(produced_at * 1000, 3)}
{%- if cookiecutter.query == "windowed-count" %}
        if self.event_time is not None:
            event[self.event_time.field] = int(produced_at * 1000)
{%- endif %}
        if self.record_bytes:
            unpadded = len(json.dumps(event)) + len(', "pad": ""')
            event["pad"] = "x" * max(0, self.record_bytes - unpadded)
        return self.values.event_value(event)

    @property
    def expected_total(self) -> int:
        return sum(self.expected.values())
{%- if cookiecutter.query == "windowed-count" %}


def event_time(config: JobConfig) -> EventTime:
    """The configured query's event time."""
    return EventTime(config.event_time_field, config.window_seconds * 1000)
{%- endif %}


def produce_plain(bootstrap: str, topic: str, partitions: int, stream: EventStream, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 10})
    for i, key in enumerate(stream.next_keys(count)):
        produce(producer, topic, stream.encode(key, time.time()), partition=i % partitions)
    if producer.flush(120):
        raise RuntimeError("producing the warm-up events timed out")


def produce_backlog(bootstrap: str, topic: str, partitions: int, stream: EventStream, count: int) -> float:
    """Produce `count` events in ONE transaction, so that the whole backlog becomes visible to
    the read_committed contenders at one instant, which this returns (wall clock)."""
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": f"bench-backlog-{uuid.uuid4().hex}",
        "transaction.timeout.ms": 600_000,
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 2_000_000,
    })
    producer.init_transactions(60)
    producer.begin_transaction()
    for i, key in enumerate(stream.next_keys(count)):
        produce(producer, topic, stream.encode(key, time.time()), partition=i % partitions)
    if producer.flush(300):
        raise RuntimeError("producing the backlog timed out")
    visible_from = time.time()
    producer.commit_transaction(120)
    return visible_from


def warm_broker(bootstrap: str, partitions: int, count: int) -> float:
    """Put `count` events through the broker the way a contender's backlog goes (one transaction
    in, read_committed out) before anything is timed; returns the seconds it took. A fresh
    broker's JVM and page cache are cold: measured, the first contender drained the same
    1,000,000-event backlog at 0.6x the rate it reached when it ran third."""
    from ..readback import read_topic

    topic = f"bench-warm-up-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    create_topics(bootstrap, {topic: partitions})
    try:
        produce_backlog(bootstrap, topic, partitions, EventStream(Keys.of(len(SAMPLE_KEYS)), "key", seed=0), count)
        read = len(read_topic(bootstrap, topic, timeout=600))
        if read != count:
            raise RuntimeError(f"broker warm-up: read {read} of {count} events back")
    finally:
        delete_topics(bootstrap, [topic])
    return time.monotonic() - started


class RateProducer(threading.Thread):
    """Produce at a fixed rate until stopped; records each counted event's produce time per key."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, stream: EventStream, rate: float,
                 seconds: float | None = None) -> None:
        super().__init__(daemon=True, name="bench-rate-producer")
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0})
        self.topic, self.partitions, self.stream, self.rate, self.seconds = topic, partitions, stream, rate, seconds
        self.produced_at: dict[str, list[float]] = defaultdict(list)
        self.produced = 0
        self.halt = threading.Event()

    def run(self) -> None:
        started = time.monotonic()
        interval = 0.01  # produce in small steps, 100 per second
        while not self.halt.is_set():
            elapsed = time.monotonic() - started
            if self.seconds is not None and elapsed >= self.seconds:
                break
            due = int(elapsed * self.rate) + 1 - self.produced
            for key in self.stream.next_keys(max(0, due)):
                now = time.time()
                produce(self.producer, self.topic, self.stream.encode(key, now),
                        partition=self.produced % self.partitions)
                if key != self.stream.keys.excluded:
                    self.produced_at[self.stream.output_key(key, now)].append(now)
                self.produced += 1
            self.producer.poll(0)
            self.halt.wait(interval)
        self.producer.flush(60)

    def stop(self) -> None:
        self.halt.set()
        self.join()


@dataclass
class OutputRecord:
    visible_at: float
    key: str
    count: int
    batch_id: int | None


class OutputTail(threading.Thread):
    """Reads the output topic from its start with read_committed; keeps every record with the
    time it became visible here, and the latest count of every key (for an append output, the
    number of its records)."""

    def __init__(self, bootstrap: str, topic: str, values: Values = JSON) -> None:
        super().__init__(daemon=True, name="bench-output-tail")
        self.bootstrap, self.topic = bootstrap, topic
        self.values = values  # the output's format
        self.records: list[OutputRecord] = []
        self.latest: dict[str, int] = {}
        self.total = 0
        self.error: str | None = None
        self.changed = threading.Condition()
        self.halt = threading.Event()

    def run(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": f"bench-tail-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            # A transaction of a million records turns visible at once: with librdkafka's default
            # prefetch this consumer took ~5 s to read them (two partitions, one broker), which
            # timed the tail, not the sink; Spark's sink, visible as it produces, hid the cost.
            "queued.min.messages": 1_000_000,
            "max.partition.fetch.bytes": 50 << 20,
        })
        try:
            metadata = consumer.list_topics(self.topic, timeout=30).topics[self.topic]
            consumer.assign([TopicPartition(self.topic, p, 0) for p in metadata.partitions])
            # Records are stamped as they arrive and parsed once nothing more is queued: parsing
            # as they come would stamp the last of a big transaction with this loop's own pace
            # (~4 s for a million records), not with the time Kafka made them visible.
            arrived: list[tuple[float, list]] = []
            while not self.halt.is_set():
                messages = consumer.consume(10_000, timeout=0 if arrived else 0.05)
                if messages:
                    arrived.append((time.time(), messages))
                elif arrived:
                    for now, batch in arrived:
                        self._take(batch, now)
                    arrived = []
        except Exception as error:  # noqa: BLE001 - reported with the results
            self.error = f"{type(error).__name__}: {error}"
        finally:
            consumer.close()

    def _take(self, messages: list, now: float) -> None:
        with self.changed:
            for message in messages:
                if message.error() is not None:
                    if message.error().code() != KafkaError._PARTITION_EOF:
                        self.error = str(message.error())
                    continue
                value = json.loads(self.values.as_json(message.value()))
                key = str(value["key"])
                # A count says how many of the key's events it covers; a record of an append output
                # (the stateless query) stands for one event: the key's n-th record, its n-th event.
                count = int(value["count"]) if "count" in value else self.latest.get(key, 0) + 1
                self.records.append(OutputRecord(now, key, count, value.get("batch_id")))
                previous = self.latest.get(key, 0)
                if count > previous:
                    self.latest[key] = count
                    self.total += count - previous
            self.changed.notify_all()

    def wait_total(self, target: int, timeout: float, alive=lambda: True) -> float | None:
        """Wait until the latest counts add up to `target`; the visible time of the record that
        completed it, or None on timeout (or when `alive()` turns false)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while self.total < target:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not alive() or self.error:
                    return None
                self.changed.wait(min(remaining, 0.5))
            running = 0
            latest: dict[str, int] = {}
            for record in self.records:  # the record at which the total first reached the target
                previous = latest.get(record.key, 0)
                if record.count > previous:
                    latest[record.key] = record.count
                    running += record.count - previous
                    if running >= target:
                        return record.visible_at
            return self.records[-1].visible_at if self.records else None

    def first_after(self, since: float, min_batch: int) -> OutputRecord | None:
        with self.changed:
            return next((r for r in self.records if r.visible_at > since and r.batch_id is not None
                         and r.batch_id > min_batch), None)

    def first_visible_after(self, since: float) -> OutputRecord | None:
        with self.changed:
            return next((r for r in self.records if r.visible_at > since), None)

    def max_batch(self) -> int:
        with self.changed:
            return max((r.batch_id for r in self.records if r.batch_id is not None), default=-1)

    def snapshot(self) -> list[OutputRecord]:
        with self.changed:
            return list(self.records)

    def stop(self) -> None:
        self.halt.set()
        self.join(10)
