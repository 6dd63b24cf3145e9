"""Contender 4: no Spark. One Python process with confluent-kafka does the Kafka-native
exactly-once pattern (consume-transform-produce):

    consume (read_committed) → parse → filter → count in a dict → every commit interval, one
    transaction: the changed counts + the consumed offsets (send_offsets_to_transaction)

The counts are state: at start-up they are rebuilt from the output topic itself (read to its
end with read_committed), which holds the last committed count of every key, consistent with
the committed offsets because both were written in the same transactions.

    python -m <package>_tools.bench.plain --bootstrap B --input T --output O --key-field color ...
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid


def rebuild_counts(bootstrap: str, topic: str) -> tuple[dict[str, int], int]:
    from ..readback import read_topic

    counts: dict[str, int] = {}
    batch = -1
    for _key, value in read_topic(bootstrap, topic):
        record = json.loads(value or b"null")
        counts[record["key"]] = max(counts.get(record["key"], 0), record["count"])
        batch = max(batch, record.get("batch_id", -1))
    return counts, batch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--input", "--output", "--key-field", "--group", "--transactional-id"):
        parser.add_argument(name, required=True)
    parser.add_argument("--excluded", default=None, help="the key value the filter drops")
    parser.add_argument("--commit-interval-ms", type=float, default=100.0)
    parser.add_argument("--max-per-transaction", type=int, default=50_000)
    args = parser.parse_args(argv)

    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "transactional.id": args.transactional_id,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "compression.type": "lz4",
    })
    producer.init_transactions(60)  # fences a previous instance, aborts its open transaction
    counts, batch_id = rebuild_counts(args.bootstrap, args.output)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": f"plain-{uuid.uuid4().hex[:6]}",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 50,
    })
    consumer.subscribe([args.input])
    key_field, excluded = args.key_field, args.excluded
    changed: set[str] = set()
    consumed = 0
    window_started = time.monotonic()
    try:
        while not stop.is_set():
            for message in consumer.consume(num_messages=5000, timeout=0.02):
                if (error := message.error()) is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(error)
                if not consumed:
                    window_started = time.monotonic()  # a transaction's window opens with its first record
                consumed += 1
                try:
                    key = json.loads(message.value() or b"null").get(key_field)
                except (ValueError, AttributeError):
                    continue  # the benchmark's input has no malformed records
                if not isinstance(key, str) or key == excluded:
                    continue
                counts[key] = counts.get(key, 0) + 1
                changed.add(key)
            due = (time.monotonic() - window_started) * 1000 >= args.commit_interval_ms
            if consumed and (due or consumed >= args.max_per_transaction):
                batch_id += 1
                producer.begin_transaction()
                for key in changed:
                    value = json.dumps({"key": key, "count": counts[key], "batch_id": batch_id}).encode()
                    while True:
                        try:
                            producer.produce(args.output, key=key.encode(), value=value)
                            break
                        except BufferError:
                            producer.poll(0.05)
                positions = consumer.position(consumer.assignment())
                producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
                producer.commit_transaction(60)
                changed.clear()
                consumed = 0
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
