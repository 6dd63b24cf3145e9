"""Sample events for the demo, the tests and the chaos runner, with the expected counts
computed directly from what was produced (independently of the job)."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import Producer

from .kafka_client import librdkafka_config

COLORS = ["red", "green", "blue", "orange", "yellow", "purple", "black", "white"]
MALFORMED = [
    b"{not json", b"[1, 2, 3]", b'{"size": 3}', b'{"color": 42}', b"\xff\xfe", b"",
    b'{"color": "\\ud800"}',  # a lone surrogate escape
    b'{"color": "\xed\xa0\x80"}',  # a surrogate's raw bytes: invalid UTF-8
    b"[" * 1000,  # deep nesting, never closed
    b'{"color": "red"} trailing',
    b'{"color": "red", "n": 1} {"color": "blue"}x',
]


@dataclass
class SampleInput:
    values: list[bytes] = field(default_factory=list)
    expected_counts: Counter[str] = field(default_factory=Counter)
    malformed_values: list[bytes] = field(default_factory=list)

    @property
    def malformed(self) -> int:
        return len(self.malformed_values)


def make_events(count: int, seed: int, key_field: str = "{{ cookiecutter.key_field }}",
                malformed_rate: float = 0.0, keys: list[str] | None = None,
                excluded: str = "orange") -> SampleInput:
    """`count` events with skewed keys (the first keys are far more frequent); a share of
    malformed records; the expected counts leave out `excluded`, as the default filter does."""
    rng = random.Random(seed)
    keys = keys or COLORS
    weights = [1.0 / (rank + 1) for rank in range(len(keys))]
    sample = SampleInput()
    for i in range(count):
        if malformed_rate and rng.random() < malformed_rate:
            sample.values.append(MALFORMED[i % len(MALFORMED)])
            sample.malformed_values.append(MALFORMED[i % len(MALFORMED)])
            continue
        key = rng.choices(keys, weights)[0]
        sample.values.append(json.dumps({key_field: key, "seq": i}).encode())
        if key != excluded:
            sample.expected_counts[key] += 1
    return sample


def produce(bootstrap_servers: str, topic: str, values: list[bytes], partitions: int | None = None,
            client: Mapping[str, str] | None = None) -> None:
    """Produce every value (round-robin over partitions when given) and wait for delivery."""
    producer = Producer(librdkafka_config(bootstrap_servers, client, {"enable.idempotence": True, "linger.ms": 10}))
    failures: list[str] = []
    for i, value in enumerate(values):
        while True:
            try:
                kwargs = {"partition": i % partitions} if partitions else {}
                producer.produce(topic, value=value, on_delivery=lambda e, _m: e and failures.append(str(e)),
                                 **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(60) or failures:
        raise RuntimeError(f"producing sample events failed: {failures[:3]}")
