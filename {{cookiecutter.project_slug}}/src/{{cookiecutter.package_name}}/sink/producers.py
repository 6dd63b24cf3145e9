"""The driver's transactional producers, one per commit shard, in a pool the sink owns."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from confluent_kafka import Producer

from ..kafka_client import ClientConfig, librdkafka_config, quiet_client_logs
from .marker import NO_BATCH, ForeignTransactionWait, ensure_marker_topic, read_marker_values
from .settings import PARTITIONER, SinkSettings, transaction_timeout_ms


class CommitShard:
    """One transactional producer and the last batch its marker says it published."""

    def __init__(self, settings: SinkSettings, shard: int) -> None:
        self.shard = shard
        self.transactional_id = settings.transactional_id(shard)
        self.producer = Producer(producer_config(settings, shard))
        # Fences any older producer with this id and completes or aborts its open transaction;
        # only after that is the marker a settled fact.
        self.producer.init_transactions(settings.commit_timeout_seconds)
        self.published = NO_BATCH
        self.published_offsets = ""  # the digest of the published batch's source offsets (SourceOffsets.digest)


class ProducerPool:
    """The sink's commit shards, owned by the sink (KafkaSink) and kept from batch to batch so
    that `init_transactions`, which fences an older driver, runs once per shard."""

    def __init__(self) -> None:
        self._shards: dict[tuple[str, str, int], CommitShard] = {}
        self.start_seconds = 0.0  # what the last start of shards took (producers, fencing, markers)
        self._starting: Future[list[tuple[str, str, int]]] | None = None

    def start_meanwhile(self, settings: SinkSettings, stopping: threading.Event | None = None) -> None:
        """Start the shards in a thread while Spark computes the first batch: their round trips
        to the brokers (init_transactions, the marker reads) then cost the batch nothing. The
        first shards_for waits for it; what it does is what shards_for would have done there."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sink-producers")
        self._starting = executor.submit(self._start_missing, settings, stopping)
        executor.shutdown(wait=False)

    def shards_for(self, settings: SinkSettings, stopping: threading.Event | None = None) -> list[CommitShard]:
        """The sink's shards; a new one starts its producer and reads its marker (settled: waiting
        for another producer's open transaction on the marker topic, within its tolerance)."""
        starting, self._starting = self._starting, None
        if starting is not None:
            try:
                starting.result()
            except Exception:  # noqa: BLE001 - started again below; fails there if it still fails
                self.reset()  # whatever it left half started
        return [self._shards[key] for key in self._start_missing(settings, stopping)]

    def _start_missing(self, settings: SinkSettings, stopping: threading.Event | None
                       ) -> list[tuple[str, str, int]]:
        keys = [(settings.bootstrap_servers, settings.transactional_id(s), s) for s in range(settings.shards)]
        missing = [key for key in keys if key not in self._shards]
        if missing:
            started = time.monotonic()
            ensure_marker_topic(settings.bootstrap_servers, settings.marker_topic, settings.client)
            for key in missing:
                self._shards[key] = CommitShard(settings, key[2])
            wait = ForeignTransactionWait(settings.sink_id, settings.foreign_transaction_tolerance_seconds, stopping)
            markers = read_marker_values(settings.bootstrap_servers, settings.marker_topic, settings.sink_id,
                                         settings.client, wait=wait)
            for key in missing:
                if (marker := markers.get(key[2])) is not None:
                    self._shards[key].published = marker.batch_id
                    self._shards[key].published_offsets = marker.source_offsets
            self.start_seconds = time.monotonic() - started
        return keys

    def reset(self) -> None:
        """Forget every producer (after a failed commit their state is unknown, or as after a
        driver restart): the next batch starts new ones, which read the markers again."""
        stale, self._shards = self._shards, {}
        for shard in stale.values():
            shard.producer.flush(0)


def producer_config(settings: SinkSettings, shard: int) -> ClientConfig:
    """The configuration of shard `shard`'s transactional producer, for the sink and for `fence`."""
    return librdkafka_config(settings.bootstrap_servers, settings.client, {
        "transactional.id": settings.transactional_id(shard),
        "transaction.timeout.ms": transaction_timeout_ms(settings.commit_timeout_seconds),
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2_097_151,
        "compression.type": "lz4",
        "partitioner": PARTITIONER,
        **quiet_client_logs(__name__),
    })


def fence(settings: SinkSettings) -> None:
    """Take over every shard's transactional id once and let go: whatever transaction a stopped
    or killed driver left open is aborted (init_transactions), so its markers are settled."""
    for shard in range(settings.shards):
        CommitShard(settings, shard).producer.flush(0)
