"""The chaos run's input: produced in chunks while the job runs, and its end offsets."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..kafka_io import produce

QUIET = {"log_level": 2}  # librdkafka: no connection-refused lines while the broker restarts


class InputProducer(threading.Thread):
    """Produces the input in chunks, a few seconds apart, while the job runs. Idempotent and
    patient (a broker restart only delays it); the verifier reads back what the topic holds.
    After every `abort_every`-th chunk (0: never), copies of the chunk's first records go to the
    topic in a transaction that is then aborted: a read_committed job must never count them.
    The topic may gain partitions meanwhile (`grow`): the next chunks use them. The last `held`
    chunks wait for a growth each (or for `release`), so that every growth, however late the
    schedule brings it, is followed by input on every partition, the new ones too."""

    ABORTED_PER_CHUNK = 200

    def __init__(self, bootstrap_servers: str, topic: str, values: list[bytes], partitions: int,
                 chunks: int, interval: float, say: Callable[[str], None], abort_every: int = 0,
                 held: int = 0) -> None:
        super().__init__(name="chaos-input", daemon=True)
        self.bootstrap_servers, self.topic, self.values = bootstrap_servers, topic, values
        self.partitions, self.chunks, self.interval, self.say = partitions, chunks, interval, say
        self.abort_every, self.held = abort_every, held
        self.produced = 0
        self.aborted = 0  # records produced in transactions that were aborted
        self.errors: list[str] = []
        self.done = threading.Event()
        self._grown_to: int | None = None
        self._growths = threading.Semaphore(0)  # one per growth: lets one held chunk go
        self._released = threading.Event()  # no growth to come: the held chunks go
        self.holding = False  # a held chunk waits for a growth

    def grow(self, partitions: int) -> None:
        """The topic has `partitions` now: the next chunk spreads over them (once its producer sees
        them), and a held chunk may go."""
        self._grown_to = partitions
        self.let_one_go()

    def let_one_go(self) -> None:
        """One held chunk may go: after a growth, or when the job ran out of input before one came."""
        self._growths.release()

    def release(self) -> None:
        """No growth is coming any more: the held chunks go now."""
        self._released.set()

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({
            "bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True, "linger.ms": 20,
            "message.timeout.ms": 900_000, **QUIET,
        })

        def on_delivery(error: Any, _message: Any) -> None:
            if error is not None:
                self.errors.append(str(error))

        try:
            size = -(-len(self.values) // self.chunks)
            starts = range(0, len(self.values), size)
            for chunk, start in enumerate(starts):
                if chunk:
                    time.sleep(self.interval)
                if chunk >= len(starts) - self.held:
                    self._wait_for_a_growth()
                self._take_growth(producer)
                for i in range(start, min(start + size, len(self.values))):
                    produce(producer, self.topic, self.values[i], partition=i % self.partitions,
                            on_delivery=on_delivery)
                while producer.flush(5.0):
                    pass  # the broker may be restarting: the idempotent producer retries
                self.produced = min(start + size, len(self.values))
                if self.abort_every and chunk % self.abort_every == self.abort_every - 1:
                    self._aborted_transaction(self.values[start:start + self.ABORTED_PER_CHUNK])
            self.say(f"input: all {self.produced} records produced to {self.topic}"
                     + (f", {self.aborted} more in aborted transactions" if self.abort_every else "")
                     + (f" ({len(self.errors)} delivery errors: {self.errors[:2]})" if self.errors else ""))
        except Exception as error:  # noqa: BLE001 - reported; the verifier reads what the topic holds
            self.errors.append(repr(error))
            self.say(f"input: producer failed: {error!r}")
        finally:
            self.done.set()

    def _wait_for_a_growth(self) -> None:
        self.holding = True
        while not self._growths.acquire(timeout=1.0) and not self._released.is_set():
            pass
        self.holding = False

    def _take_growth(self, producer: Any) -> None:
        grown = self._grown_to
        if grown is None or grown == self.partitions:
            return
        for _ in range(60):  # the producer's metadata must know the new partitions before it sends to them
            if len(producer.list_topics(self.topic, timeout=10).topics[self.topic].partitions) >= grown:
                self.partitions = grown
                return
            time.sleep(1)

    def _aborted_transaction(self, values: list[bytes]) -> None:
        """`values` again, in a transaction that is aborted. A failure (a broker restarting) only
        means fewer aborted records: an open transaction left behind is aborted by the broker."""
        from confluent_kafka import Producer

        transactional = Producer({"bootstrap.servers": self.bootstrap_servers, "transactional.id":
                                  f"{self.topic}-aborted", "transaction.timeout.ms": 30_000, **QUIET})
        try:
            transactional.init_transactions(60)
            transactional.begin_transaction()
            for i, value in enumerate(values):
                produce(transactional, self.topic, value, partition=i % self.partitions)
            transactional.flush(60)
            transactional.abort_transaction(60)
            self.aborted += len(values)
        except Exception as error:  # noqa: BLE001 - see above
            self.say(f"input: an aborted transaction failed ({error}); the broker ends it")
def end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """The input's end offsets (its last stable offsets: the input is not transactional)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"chaos-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False, **QUIET})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in sorted(metadata.partitions)}
    finally:
        consumer.close()
