"""The batch marker: the last batch each commit shard published, written in the same Kafka
transaction as the batch's records, to a compacted topic keyed by sink and shard (it never
expires, unlike consumer-group offsets). Read with read_committed, so "batch N is visible"
and "the marker says N" are one atomic fact."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from ..failures import JobFailure, Outcome
from ..kafka.client import librdkafka_config
from ..observability import metrics
from ..observability.logs import event
from ..storage.layout_versions import check_format
from ..waiting import Tolerance, poll

log = logging.getLogger(__name__)

NO_BATCH = -1
# The marker value's layout; a reader refuses a marker of a version it does not know.
MARKER_FORMAT = 1


def marker_key(sink_id: str, shard: int) -> bytes:
    return f"{sink_id}/{shard}".encode()


def parse_marker_key(key: bytes) -> tuple[str, int] | None:
    """(sink id, shard) of a key of the form `<sink_id>/<digits>`; None for any other key."""
    owner, slash, shard = key.decode(errors="replace").rpartition("/")
    return (owner, int(shard)) if slash and shard.isdigit() else None


def shard_of(key: bytes, sink_id: str) -> int | None:
    """The shard a marker key names if it is `sink_id`'s, else None. Several sinks may share the
    topic, and one id may be the start of another's ("a" and "a-x"): only `<sink_id>/<digits>` is ours."""
    parsed = parse_marker_key(key)
    return parsed[1] if parsed is not None and parsed[0] == sink_id else None


def marker_value(sink_id: str, shard: int, batch_id: int, records: int, source_offsets: str = "") -> bytes:
    """`source_offsets`: the digest of the batch's source offsets (SourceOffsets.digest), which tell a re-run of the
    batch (the same offsets) from another batch of the same id (a checkpoint older than the output)."""
    return json.dumps({"format": MARKER_FORMAT, "sink_id": sink_id, "shard": shard, "batch_id": batch_id,
                       "records": records, "source_offsets": source_offsets, "at": time.time()}).encode()


@dataclass(frozen=True)
class Marker:
    batch_id: int
    source_offsets: str  # the digest of the batch's source offsets (SourceOffsets.digest)
    # A shard's markers only move forward: a lower batch a later marker of the shard named (an
    # invariant broken, which the coordinator and the start-up check refuse: MarkersWentBack).
    went_back_to: int | None = None


def parse_marker(value: bytes, topic: str) -> Marker:
    """A marker value; one of an unknown layout is refused, not guessed at."""
    marker = json.loads(value)
    check_format(f"batch marker in topic {topic!r}", marker.get("format"), MARKER_FORMAT)
    return Marker(int(marker["batch_id"]), str(marker["source_offsets"]))


class MarkersUndecided(JobFailure, TimeoutError):
    """An open transaction on the marker topic kept newer markers from being read past the
    tolerance: a failure for the restart strategy."""

    outcome = Outcome.RETRY


@dataclass(frozen=True)
class ForeignTransactionWait:
    """How long a settled read waits for another producer's open transaction on the marker topic
    to end. Such a transaction (a sibling sink that crashed mid-commit, a stuck tool) ends by
    itself: its producer commits or aborts, or the broker aborts it after the producer's
    transaction.timeout.ms. Until then nothing this sink committed after it can be read, so the
    batch waits in place, like a batch during a Kafka outage, and fails only past `tolerance_seconds`."""

    sink_id: str
    tolerance_seconds: float
    stopping: threading.Event | None = None  # the job is stopping: give up the wait, publish nothing
    log_every_seconds: float = 5.0


def read_markers(bootstrap_servers: str, topic: str, sink_id: str, client: Mapping[str, str] | None = None,
                 timeout: float = 30.0, settled: bool = True) -> dict[int, int]:
    """The last committed batch of every shard of `sink_id`: {shard: batch id} (read_marker_values)."""
    found = read_marker_values(bootstrap_servers, topic, sink_id, client, timeout, settled)
    return {shard: marker.batch_id for shard, marker in found.items()}


def read_marker_values(bootstrap_servers: str, topic: str, sink_id: str, client: Mapping[str, str] | None = None,
                       timeout: float = 30.0, settled: bool = True, wait: ForeignTransactionWait | None = None
                       ) -> dict[int, Marker]:
    """The last committed marker of every shard of `sink_id`: {shard: marker}, the one of its
    highest batch; a shard a later marker of which named a lower batch says so (Marker.went_back_to).

    A read_committed consumer stops at the last stable offset (LSO): an open transaction of
    another producer on this topic (another sink sharing it, a stuck producer) would hide every
    marker committed after it, and this sink would publish those batches again. So, `settled`,
    the markers are read only once the LSO has reached the high watermark seen at the start:
    every marker committed before this call is then readable. If it does not within `timeout`
    (or, with `wait`, within its tolerance), fail. The coordinator reads settled markers after its
    init_transactions has aborted the previous driver's open transaction (which would otherwise
    hold the LSO back itself); the start-up checks, which run before that, read what is stable
    now (`settled=False`)."""
    config = librdkafka_config(bootstrap_servers, client, {
        "group.id": f"marker-reader-{uuid.uuid4().hex}",
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        # The end of the partition is known only from an empty fetch, which the broker holds for
        # fetch.wait.max.ms (librdkafka's default 500 ms: half a second of every read, measured).
        "fetch.wait.max.ms": 10,
    })
    consumer = Consumer(config)
    # The same client reading uncommitted records sees the high watermark (librdkafka answers a
    # watermark query with the LSO for read_committed, with the high watermark otherwise).
    snapshot = Consumer({**config, "isolation.level": "read_uncommitted"})
    markers: dict[int, Marker] = {}
    deadline = time.monotonic() + timeout
    try:
        if not _topic_exists(consumer, topic, timeout, deadline):
            return markers  # no marker topic yet: nothing was ever published
        partition = TopicPartition(topic, 0, 0)
        low, high = snapshot.get_watermark_offsets(partition, timeout=timeout, cached=False)
        if high <= low:
            return markers
        if settled:
            if wait is None:
                stable = _wait_for_stable_offset(consumer, partition, high, deadline)
            else:
                stable = _wait_out_foreign_transaction(consumer, snapshot, partition, high, wait)
            if stable < high:
                raise MarkersUndecided(
                    f"batch markers in {topic!r}: a transaction of another producer has been open for more "
                    f"than {timeout if wait is None else wait.tolerance_seconds:.0f}s before offset {high} (last "
                    f"stable offset {stable}; {_holder(snapshot, partition, stable)}), and markers committed after "
                    "it cannot be read yet. Find the producer (kafka-transactions.sh list / describe-producers on "
                    "the marker topic) and let it finish, or abort it.")
        deadline = time.monotonic() + timeout
        partition.offset = low
        consumer.assign([partition])
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            if (error := message.error()) is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return markers
                raise KafkaException(error)
            shard = shard_of(message.key() or b"", sink_id)
            if shard is not None and (value := message.value()) is not None:
                marker, known = parse_marker(value, topic), markers.get(shard)
                if known is None:
                    markers[shard] = marker
                elif marker.batch_id >= known.batch_id:
                    markers[shard] = replace(marker, went_back_to=known.went_back_to)
                else:  # kept, and said: the highest batch stays what the shard is known to have published
                    markers[shard] = replace(known, went_back_to=marker.batch_id)
        raise TimeoutError(f"reading the batch markers from {topic!r} took longer than {timeout:.0f}s")
    finally:
        consumer.close()
        snapshot.close()


def _topic_exists(consumer: Consumer, topic: str, timeout: float, deadline: float) -> bool:
    # A topic created a moment ago may have no leader yet: wait for it, do not read "no markers".
    metadata = poll(lambda: consumer.list_topics(topic, timeout=timeout).topics.get(topic),
                    lambda found: found is None or found.error is None or not found.error.retriable(),
                    deadline - time.monotonic())
    if metadata is None or (metadata.error is not None and metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return False
    if metadata.error is not None:  # anything else would be taken for "nothing published"
        raise KafkaException(metadata.error)
    return True


def _wait_for_stable_offset(consumer: Consumer, partition: TopicPartition, target: int, deadline: float) -> int:
    """The partition's LSO once it reached `target`, or the last one seen at the deadline."""
    return poll(lambda: consumer.get_watermark_offsets(partition, timeout=10, cached=False)[1],
                lambda stable: stable >= target, deadline - time.monotonic())


def _wait_out_foreign_transaction(consumer: Consumer, snapshot: Consumer, partition: TopicPartition, target: int,
                                  wait: ForeignTransactionWait) -> int:
    """The LSO once it reached `target`, or the last one seen when the tolerance is spent. Past
    the first few seconds (a transaction about to end), a line every few seconds says who holds it."""
    patience = Tolerance("waiting for it to end", wait.tolerance_seconds, wait.stopping,
                         log_every=wait.log_every_seconds, quiet_for=wait.log_every_seconds)
    gauge = metrics.MARKER_WAIT.labels(wait.sink_id)
    try:
        while True:
            _low, stable = consumer.get_watermark_offsets(partition, timeout=10, cached=False)
            if stable >= target:
                return stable

            def say(waited: float, stable: int = stable) -> None:
                gauge.set(waited)
                holder = _holder(snapshot, partition, stable)
                log.warning("batch markers in %r: the batch has waited %.0fs for a transaction of another producer, "
                            "open at offset %d (%s), to end (foreign_transaction_tolerance_seconds %.0f)",
                            partition.topic, waited, stable, holder, wait.tolerance_seconds,
                            extra=event("marker_topic_blocked", seconds=round(waited), offset=stable, holder=holder,
                                        tolerance_seconds=wait.tolerance_seconds))

            if not patience.pause(say, 0.2):
                if wait.stopping is not None and wait.stopping.is_set():
                    raise MarkersUndecided(f"batch markers in {partition.topic!r}: the job is stopping while another "
                                           "producer's transaction holds the marker topic; nothing was published")
                return stable
    finally:
        gauge.set(0)


def _holder(snapshot: Consumer, partition: TopicPartition, stable: int) -> str:
    """What the open transaction's first record says of its producer: the record at the LSO. (The
    Python client has no DescribeProducers; Kafka's kafka-transactions.sh names the producer id.)"""
    snapshot.assign([TopicPartition(partition.topic, 0, stable)])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            message = snapshot.poll(0.5)
            if message is None or message.error():
                continue
            key = message.key() or b""
            age = time.time() - message.timestamp()[1] / 1000
            parsed = parse_marker_key(key)
            who = f"sink {parsed[0]!r}, shard {parsed[1]}" if parsed else f"key {key.decode(errors='replace')[:80]!r}"
            return f"its first record: {who}, written {age:.0f}s ago"
        return "its first record could not be read"
    finally:
        snapshot.unassign()
