"""Read what the job published, as a downstream consumer must: with read_committed."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

from confluent_kafka import Consumer, IsolationLevel, KafkaError, Message, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .routing import NO_TOPIC, qualified
from .value_formats import JSON

# A producer's commit returns once its coordinator has logged the decision; the markers that
# make the records readable reach the partitions a moment later. A read right after a commit
# waits this long for them (a transaction a killed producer left open never settles: then the
# read shows what is committed, after the wait).
SETTLE_SECONDS = 10.0


Answer = dict[str, object]  # an output record's value, without the batch id the sink adds
Headers = tuple[tuple[str, bytes | None], ...]  # a record's headers, in order
OUTPUT, DEAD_LETTER = "output", "dead-letter"  # a record's role: which of the job's two topics holds it
AsJson = Callable[[bytes], bytes]  # an output value in JSON, from its format (value_formats.py)


@dataclass(frozen=True, order=True)
class Record:
    """One record the job published, whole."""

    batch: int  # the batch id the sink gave it (its `batch_id` header)
    role: str  # OUTPUT or DEAD_LETTER
    key: bytes
    value: bytes
    headers: Headers = ()  # its headers but the sink's last `batch_id` (a query's that keeps its input's)

    def without_batch_id(self) -> tuple[str, bytes, str, Headers]:
        """The record as boundary-free comparisons see it: its value without the batch id the sink
        added as the JSON object's last field, its headers without the sink's."""
        value = json.loads(self.value)
        value.pop("batch_id", None)
        return self.role, self.key, json.dumps(value, sort_keys=True), self.headers


@dataclass
class Published:
    """Every published answer, per key in publication order, and the dead letters."""

    answers: dict[str, list[tuple[int, Answer]]] = field(default_factory=lambda: defaultdict(list))  # (batch, .)
    dead_letters: list[dict] = field(default_factory=list)

    def final_answers(self) -> dict[str, Answer]:
        return {key: history[-1][1] for key, history in self.answers.items()}

    def batches(self) -> set[int]:
        """The batches with an output record."""
        return {batch for history in self.answers.values() for batch, _ in history}

    def records(self) -> int:
        return sum(len(history) for history in self.answers.values())


def read_topic(bootstrap_servers: str, topic: str, isolation: str = "read_committed",
               timeout: float = 60.0, settle: float = SETTLE_SECONDS) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) up to the end of every partition as seen at call time (read_committed:
    after up to `settle` seconds for the transactions in flight to land)."""
    return [(message.key(), message.value())
            for message in _read(bootstrap_servers, topic, isolation, timeout, settle)]


def read_positions(bootstrap_servers: str, topic: str, timeout: float = 60.0
                   ) -> list[tuple[int, int, bytes | None]]:
    """Every committed record as (partition, offset, value): where the input put each event."""
    return [(message.partition() or 0, message.offset() or 0, message.value())
            for message in _read(bootstrap_servers, topic, "read_committed", timeout, SETTLE_SECONDS)]


def batch_header_mismatches(bootstrap_servers: str, topic: str, as_json: AsJson = JSON.as_json) -> list[str]:
    """The committed records whose `batch_id` header is not the `batch_id` of their value
    (`as_json`: the value in JSON, from the topic's format)."""
    mismatches = []
    for message in _read(bootstrap_servers, topic, "read_committed", 60.0, SETTLE_SECONDS):
        header = dict(message.headers() or []).get("batch_id")
        value = json.loads(as_json(message.value() or b"null"))["batch_id"]
        if header is None or int(header) != value:
            mismatches.append(f"{topic}/{message.partition()}@{message.offset()}: header {header!r}, value {value}")
    return mismatches


def wait_for_settled_transactions(bootstrap_servers: str, topic: str, timeout: float = SETTLE_SECONDS) -> bool:
    """Wait until no partition of the topic has a transaction in flight (its last stable offset is
    its end); False if one still has after `timeout` seconds."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    deadline = time.monotonic() + timeout
    while True:
        ends = {}
        for isolation in (IsolationLevel.READ_UNCOMMITTED, IsolationLevel.READ_COMMITTED):
            futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
                                         isolation_level=isolation, request_timeout=30)
            ends[isolation] = {tp.partition: future.result().offset for tp, future in futures.items()}
        if ends[IsolationLevel.READ_UNCOMMITTED] == ends[IsolationLevel.READ_COMMITTED]:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def _read(bootstrap_servers: str, topic: str, isolation: str, timeout: float, settle: float) -> list[Message]:
    if isolation == "read_committed" and settle > 0:
        wait_for_settled_transactions(bootstrap_servers, topic, settle)
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"readback-{uuid.uuid4().hex}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 10,  # the end of a partition is an empty fetch, held this long by the broker
    })
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        assignment = []
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
            if high > low:
                assignment.append(TopicPartition(topic, partition, low))
        if not assignment:
            return []
        consumer.assign(assignment)
        remaining = {tp.partition for tp in assignment}
        records: list[Message] = []
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        remaining.discard(message.partition())
                        continue
                    raise RuntimeError(f"reading {topic}: {error}")
                records.append(message)
        if remaining:
            raise TimeoutError(f"reading {topic}: partitions {sorted(remaining)} not read to the end in {timeout}s")
        return records
    finally:
        consumer.close()


def read_records(bootstrap_servers: str, output_topic: str, dead_letter_topic: str,
                 settle: float = SETTLE_SECONDS, as_json: AsJson = JSON.as_json,
                 routed_topics: Mapping[str, str] | None = None) -> list[Record]:
    """Every record a read_committed consumer sees on the job's topics, in each partition's
    order, each value in JSON (`as_json`: the output's, from its format; dead letters are JSON);
    `settle=0` reads at once, where a transaction is known to be left open. `routed_topics`: a
    routing job's answer topics (its `[routes]`), read in place of `output_topic`, each mapped to
    the name its records' keys are qualified with (routing.qualified: the topic itself, or the
    topic a twin's stands for); a dead letter of an answer whose route has no topic is read as that
    answer, qualified by routing.NO_TOPIC."""
    records = []
    answers = [(OUTPUT, topic) for topic in routed_topics or {}] or [(OUTPUT, output_topic)]
    for role, topic in (*answers, (DEAD_LETTER, dead_letter_topic)):
        for message in _read(bootstrap_servers, topic, "read_committed", 60.0, settle):
            headers = cast(list[tuple[str, bytes | None]], message.headers() or [])  # a list, as the client gives it
            if not headers or headers[-1][0] != "batch_id":
                raise AssertionError(f"{topic}/{message.partition()}@{message.offset()} does not end its headers "
                                     f"with a batch_id header: {headers}")
            value, key, kind = message.value() or b"", message.key() or b"", role
            if routed_topics and role == OUTPUT:
                key = qualified(routed_topics[topic], key.decode()).encode()
            elif routed_topics and (misrouted := _misrouted_answer(value)) is not None:
                kind, key, value = OUTPUT, *misrouted  # an answer of its own qualifier: judged as answers are
            records.append(Record(int(headers[-1][1] or b""), kind, key,
                                  as_json(value) if role == OUTPUT and value else value, tuple(headers[:-1])))
    return records


def _misrouted_answer(dead_letter: bytes) -> tuple[bytes, bytes] | None:
    """A dead letter of an answer whose route has no topic, as (qualified key, the answer's
    value); None for any other dead letter."""
    value = json.loads(dead_letter or b"null")
    if not isinstance(value, dict) or "route" not in value:
        return None
    return qualified(NO_TOPIC, value["key"]).encode(), base64.b64decode(value["value_base64"])


def read_published(bootstrap_servers: str, output_topic: str, dead_letter_topic: str,
                   settle: float = SETTLE_SECONDS, as_json: AsJson = JSON.as_json,
                   routed_topics: Mapping[str, str] | None = None) -> Published:
    """What a read_committed consumer sees, as answers per key and dead letters (a routing job's,
    `routed_topics`: as read_records qualifies them)."""
    published = Published()
    for record in read_records(bootstrap_servers, output_topic, dead_letter_topic, settle, as_json, routed_topics):
        value = json.loads(record.value or b"null")
        if record.role == OUTPUT:
            value.pop("batch_id", None)
            published.answers[record.key.decode()].append((record.batch, value))
        else:
            published.dead_letters.append(value)
    return published
