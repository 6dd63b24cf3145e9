"""The commit shards' transactional producers: how a shard starts (start_shards: its producer's
init_transactions, then its marker, settled), on the driver, where a pool the sink owns keeps them
from batch to batch, or in a publishing task (publishing_tasks.py), for one batch."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from confluent_kafka import KafkaError, KafkaException, Producer

from ..failures import JobFailure, Outcome
from ..kafka.client import ClientConfig, librdkafka_config, quiet_client_logs
from ..kafka.permissions import transactional_ids_refusal
from .marker import ForeignTransactionWait, read_marker_values
from .marker_topic import ensure_marker_topic
from .recovery import ShardState
from .settings import PARTITIONER, SinkSettings, transaction_timeout_ms, transactional_ids

# A shard of a sink: its brokers, its transactional id, its number.
_Key = tuple[str, str, int]


def _key(settings: SinkSettings, shard: int) -> _Key:
    return settings.bootstrap_servers, settings.transactional_id(shard), shard


def _keys(settings: SinkSettings) -> list[_Key]:
    return [_key(settings, shard) for shard in range(settings.shards)]


class CommitShard:
    """One commit shard's transactional producer. What its marker says is the pool's (ShardState)."""

    def __init__(self, settings: SinkSettings, shard: int) -> None:
        self.shard = shard
        self.transactional_id = settings.transactional_id(shard)
        self.producer = Producer(producer_config(settings, shard))
        # Fences any older producer with this id and completes or aborts its open transaction;
        # only after that is the marker a settled fact.
        try:
            self.producer.init_transactions(settings.commit_timeout_seconds)
        except KafkaException as error:
            if error.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise TransactionalIdRefused.of(settings) from error
            raise


class TransactionalIdRefused(JobFailure, RuntimeError):
    """Kafka refuses the job's principal this sink's transactional ids (an ACL): no restart helps."""

    outcome = Outcome.FIX_SETTING
    option = "transactional_id_prefix"

    @classmethod
    def of(cls, settings: SinkSettings) -> TransactionalIdRefused:
        prefix = transactional_ids(settings.transactional_id_prefix, settings.sink_id)
        return cls(transactional_ids_refusal(settings.client, prefix))


class ProducerPool:
    """The sink's commit shards, owned by the sink (KafkaSink) and kept from batch to batch so
    that `init_transactions`, which fences an older driver, runs once per shard; and each
    shard's state (ShardState): read from its marker when it starts, then replaced by a new
    value each time the shard commits a batch."""

    def __init__(self) -> None:
        self._shards: dict[_Key, CommitShard] = {}
        self._states: dict[_Key, ShardState] = {}
        self.start_seconds = 0.0  # what the last start of shards took (producers, fencing, markers)
        self._starting: Future[list[_Key]] | None = None

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

    def states(self, settings: SinkSettings) -> list[ShardState]:
        """Each shard's state, in shard order, once shards_for started them."""
        return [self._states[key] for key in _keys(settings)]

    def committed(self, settings: SinkSettings, state: ShardState) -> None:
        """A shard committed a batch: `state` replaces what the pool held for it."""
        self._states[_key(settings, state.shard)] = state

    def settle(self, settings: SinkSettings, stopping: threading.Event | None = None) -> None:
        """Every shard's state known (where not: its id fenced, its marker read), and no producer
        kept: the publishing tasks take the shards' transactional ids over, which fences the
        driver's producers (publishing_tasks.py)."""
        if any(key not in self._states for key in _keys(settings)) or self._starting is not None:
            self.shards_for(settings, stopping)
        self.release()

    def _start_missing(self, settings: SinkSettings, stopping: threading.Event | None) -> list[_Key]:
        keys = _keys(settings)
        without_producer = [key for key in keys if key not in self._shards]
        unknown = {key[2] for key in keys if key not in self._states}
        if without_producer:
            started = time.monotonic()
            if unknown:
                ensure_marker_topic(settings.bootstrap_servers, settings.marker_topic, settings.client)
            producers, states = start_shards(settings, [key[2] for key in without_producer], stopping,
                                             read_markers=bool(unknown))
            for key in without_producer:
                self._shards[key] = producers[key[2]]
            for key in keys:  # a state is dropped only with its producer (reset): every unknown one started now
                if key[2] in unknown:
                    self._states[key] = states[key[2]]
            self.start_seconds = time.monotonic() - started
        return keys

    def release(self) -> None:
        """Let the producers go and keep each shard's state: what the shards commit next is
        published by producers that start later (the publishing tasks', or new ones here)."""
        stale, self._shards = self._shards, {}
        _let_go(stale.values())

    def reset(self) -> None:
        """Forget every producer (after a failed commit their state is unknown, or as after a
        driver restart): the next batch starts new ones, which read the markers again."""
        stale, self._shards, self._states = self._shards, {}, {}
        _let_go(stale.values())


def start_shards(settings: SinkSettings, shards: list[int], stopping: threading.Event | None = None,
                 read_markers: bool = True) -> tuple[dict[int, CommitShard], dict[int, ShardState]]:
    """Start `shards`: each one's producer, whose init_transactions fences any older producer of
    its transactional id and aborts its open transaction; then, once all are settled, what their
    markers say (read settled: another producer's open transaction on the marker topic is waited
    out, within foreign_transaction_tolerance_seconds), unless not `read_markers`."""
    producers = {shard: CommitShard(settings, shard) for shard in shards}
    if not read_markers:
        return producers, {}
    wait = ForeignTransactionWait(settings.sink_id, settings.foreign_transaction_tolerance_seconds, stopping)
    markers = read_marker_values(settings.bootstrap_servers, settings.marker_topic, settings.sink_id,
                                 settings.client, wait=wait)
    return producers, {shard: ShardState.of_marker(shard, settings.transactional_id(shard), markers.get(shard))
                       for shard in shards}


def _let_go(shards: Iterable[CommitShard]) -> None:
    for shard in shards:
        # A fenced or failed producer may raise its error again here: it must not replace
        # the error the batch failed with, which the runner judges.
        with contextlib.suppress(KafkaException):
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
