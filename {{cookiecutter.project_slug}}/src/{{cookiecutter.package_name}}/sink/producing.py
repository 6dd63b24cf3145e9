"""A record handed to the Kafka client, whichever producer it is (a commit shard's transactional
one, or the at-least-once sink's): a full local queue waited out while librdkafka sends, and a
record the client refuses as too large stopped in one line naming the limit (RecordRejected)."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from ..failures import JobFailure, Outcome
from .settings import Headers

DeliveryCallback = Callable[[KafkaError | None, Message], None]


class RecordRejected(JobFailure, RuntimeError):
    """The client refused a record (too large for the producer's limit): a re-run would meet the
    same record, so the job stops, naming the limit to raise."""

    outcome = Outcome.FIX_SETTING
    option = "kafka.message.max.bytes"


def produce(producer: Producer, topic: str, key: bytes | None, value: bytes | None, headers: Headers,
            on_delivery: DeliveryCallback | None = None) -> None:
    """Produce a record; a refusal of the client's is handled as produce_again says."""
    try:
        producer.produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery)
    except (BufferError, KafkaException) as error:
        produce_again(producer, error, topic, key, value, headers, on_delivery)


def produce_again(producer: Producer, failure: BufferError | KafkaException, topic: str, key: bytes | None,
                  value: bytes | None, headers: Headers, on_delivery: DeliveryCallback | None = None) -> None:
    """After the client refused a record: a full local queue is waited out (librdkafka sends some
    first) and the record produced; a record too large is RecordRejected; any other refusal goes up."""
    while isinstance(failure, BufferError):
        producer.poll(0.05)
        try:
            producer.produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery)
            return
        except (BufferError, KafkaException) as error:
            failure = error
    if (refusal := _refused(failure, topic, key, value)) is None:
        raise failure
    raise refusal from failure


def _refused(error: KafkaException, topic: str, key: bytes | None, value: bytes | None) -> RecordRejected | None:
    """A produce call the client itself refused: RecordRejected for a record larger than
    message.max.bytes; None for any other refusal (the client's exception goes up as it is)."""
    if error.args[0].code() not in _TOO_LARGE:
        return None
    size = len(value or b"") + len(key or b"")
    return RecordRejected(
        f"a record for {topic!r} (key {bytes(key or b'')[:60]!r}, {size} bytes of key and value) was "
        f"refused: {error.args[0].str()}. The producer's limit is message.max.bytes (librdkafka "
        "default 1,000,000; set it in [kafka], below the broker's and topic's max.message.bytes).")


_TOO_LARGE = (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE)
