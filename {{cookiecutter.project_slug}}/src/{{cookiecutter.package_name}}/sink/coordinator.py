"""Phase 2 (commit), on the driver: publish a batch whose records every task has computed.

The sink calls `commit_batch(records, N, pool)` only after batch N's execution succeeded, so the
state store versions of N and `offsets/N` exist: this is Flink's "checkpoint complete". From here
on batch N must become visible exactly once, whatever crashes.

    Step 1. Recovery, decided by recovery.decide (a pure function) from what the sink log,
            the batch markers (each shard's ShardState, read when its producer started) and
            `offsets/N` say: if the sink log says N is committed, N was published before a
            crash: publish nothing. A shard whose batch marker is at N published N before a
            crash: it publishes nothing again. A marker past N (or at N from other source
            offsets) is an error, never a skip: Spark plans N+1 only after N's commit, so a
            marker ahead means this checkpoint is older than the output (CheckpointBehindOutput).
            So is a shard's marker that went back to a lower batch (MarkersWentBack).
            A re-run of N is compared with the first attempt's entry (rows and digest per
            shard), and the source offsets it records must not go back from the previous entry's.
    Step 2. Write the sink log entry for N, status `prepared`, before touching Kafka.
    Step 3. Per shard, one short Kafka transaction: the batch's records of that shard (counts
            and dead letters) and the batch marker.
    Step 4. Commit it: retry a commit that timed out, abort when the error requires it,
            fail the query when the producer is fenced or fatal. The shard's new state is a new
            ShardState in the pool.
    Step 5. Mark the log entry `committed`. (Then Spark writes `commits/N`.)
    Step 6. Delete log entries older than LOG_ENTRIES_KEPT batches.

A new driver's `init_transactions` fences the old one and aborts its open transaction, so a
crash between steps 2 and 4 leaves nothing visible. Spark then runs batch N again from the same
offsets and state, which gives the same records (for a deterministic query: a re-run that does
not is reported), and the re-run publishes them once; a shard whose marker already has N (a
crash between two shards' commits) publishes nothing again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass

import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.errors.exceptions.captured import CapturedException

from ..failures import JobFailure, Outcome
from ..observability import metrics
from ..observability.logs import event
from ..storage.checkpoint import SourceOffsets
from . import faults
from . import publishing_tasks as tasks
from .batch_records import BatchRecords, InlineRecords, chunks_of
from .distributed_records import DistributedRecords
from .invariants import (
    RerunMismatch,
    SourceOffsetsWentBack,
    checkpoint_behind_output,
    markers_went_back,
)
from .producers import CommitShard, ProducerPool
from .recovery import Action, BatchFigures, Decision, ShardState, decide
from .settings import SinkSettings
from .shard_transaction import CommitFailed, ProducerFenced, ShardFigures, run_shard_transaction
from .sink_log import COMMITTED, PREPARED, LogEntry, SinkLog

log = logging.getLogger(__name__)

LOG_ENTRIES_KEPT = 100


@dataclass(frozen=True)
class BatchPublished:
    """What commit_batch did for a batch: its log entry (committed), the records it published per
    topic (none for a batch found published before a crash), the seconds phase 2 took, where it
    ran ("driver" or "tasks"), and the seconds before it (kafka_sink.py): phase 1 (reading the
    batch's offsets, and its execution)."""

    entry: LogEntry
    records_per_topic: dict[str, int]
    seconds: float
    published_from: str = "driver"
    phase1_seconds: float = 0.0


def commit_batch(settings: SinkSettings, records: BatchRecords | DistributedRecords | pa.Table, batch_id: int,
                 pool: ProducerPool, stopping: threading.Event | None = None,
                 source_offsets: SourceOffsets | None = None) -> BatchPublished | None:
    """`records`: the batch on the driver (batch_records.py; an Arrow table is taken as it is) or
    on the executors (distributed_records.py), which decides where steps 3 and 4 run.
    `pool`: the sink's producers. `stopping`: set when the job stops; a wait for another
    producer's transaction then gives up. `source_offsets`: the batch's `offsets/N`, if the caller
    read it already. None for a batch without records."""
    faults.maybe_crash(faults.BATCH_COMPUTED, batch_id)
    if isinstance(records, pa.Table):
        records = InlineRecords.of(records, settings.shards)
    if sum(records.rows_per_shard) == 0:
        return None  # an empty batch (e.g. a no-data batch that only advanced state): nothing to publish
    log_ = SinkLog(settings.checkpoint, settings.sink_id)
    started = time.monotonic()
    published: Counter[str] = Counter()
    try:
        in_tasks = isinstance(records, DistributedRecords)
        place = "tasks" if in_tasks else "driver"
        # Every shard's settled state; the driver's producers only where the driver publishes.
        shards = [] if in_tasks else pool.shards_for(settings, stopping)
        if in_tasks:
            pool.settle(settings, stopping)

        # Step 1. Recovery: what the log, the markers and the checkpoint say; `decide` says what to do.
        figures = BatchFigures(tuple(records.rows_per_shard), tuple(f"{d:016x}" for d in records.digests),
                               source_offsets or SourceOffsets.of_batch(settings.checkpoint, batch_id))
        states = pool.states(settings)
        attempt, before = log_.read(batch_id), log_.latest_before(batch_id)
        decision = decide(batch_id, figures, attempt, before, states)
        if attempt is not None:  # a re-run: logged where it differs, or refused (on_rerun_mismatch)
            check_rerun(settings, batch_id, attempt, figures, decision)
        match decision.action:
            case Action.MARKERS_WENT_BACK:
                state = states[decision.shards[0]]
                raise markers_went_back(settings.sink_id, settings.marker_topic, state.shard, state)
            case Action.CHECKPOINT_BEHIND_OUTPUT:
                state = states[decision.shards[0]]
                raise checkpoint_behind_output(settings, batch_id, state.batch_id, state.shard,
                                               "Nothing was published.")
            case Action.SOURCE_OFFSETS_WENT_BACK:
                assert before is not None, "decide() compares the offsets with the entry before"
                raise source_offsets_went_back(batch_id, before, decision)
            case Action.ALREADY_COMMITTED:
                assert attempt is not None, "decide() finds a batch committed in its log entry"
                return BatchPublished(attempt, {}, time.monotonic() - started, place)
            case Action.PUBLISH:
                pass
        entry = LogEntry(
            batch_id=batch_id,
            status=PREPARED,
            transactional_ids=[settings.transactional_id(shard) for shard in range(settings.shards)],
            records_per_shard=list(figures.rows_per_shard),
            digests_per_shard=list(figures.digests_per_shard),
            source_offsets=figures.source_offsets,
            records=sum(figures.rows_per_shard),
            prepared_at=time.time(),
        )
        if decision.shards:
            # Step 2. The log entry, before Kafka is touched.
            log_.write(entry)
            faults.maybe_crash(faults.AFTER_LOG_ENTRY, batch_id)
            # Steps 3 and 4, per shard; each commit gives the shard's new state.
            offsets = figures.source_offsets.digest()
            if isinstance(records, DistributedRecords):
                published += publish_from_tasks(settings, records, batch_id, decision.shards, offsets, pool)
            else:
                published += publish_from_driver(settings, records, batch_id, decision.shards, offsets, pool, shards)
        # Step 5.
        entry = entry.committed(time.time())
        log_.write(entry)
        faults.maybe_crash(faults.AFTER_LOG_COMMITTED, batch_id)
    except Exception as error:
        pool.reset()  # its producers' state is unknown now
        metrics.COMMIT_FAILURES.labels(settings.sink_id).inc()
        if isinstance(error, ProducerFenced):
            metrics.FENCED.labels(settings.sink_id).inc()
        raise
    seconds = time.monotonic() - started
    metrics.record_batch(settings.sink_id, published, seconds)
    # Step 6.
    log_.forget_before(batch_id - LOG_ENTRIES_KEPT + 1)
    metrics.BATCHES_PUBLISHED_FROM.labels(settings.sink_id, place).inc()
    return BatchPublished(entry, dict(published), seconds, place)


def check_rerun(settings: SinkSettings, batch_id: int, first: LogEntry, rerun: BatchFigures,
                decision: Decision) -> None:
    """A re-run whose figures differ from the first attempt's (decision.rerun_mismatch): counted in
    eos_sink_rerun_mismatch_total, and logged, or refused. The shards whose marker says they published N hold
    the first attempt's records if it was only prepared: publishing the others from this
    computation would mix two in one batch, which on_rerun_mismatch = "fail" refuses (the job
    stops, nothing more published) and "warn" lets through."""
    if not decision.rerun_mismatch:
        return
    differ, committed_shards = list(decision.rerun_mismatch), sorted(decision.published_before)
    metrics.RERUN_MISMATCH.labels(settings.sink_id).inc()
    mixed = first.status is PREPARED and bool(committed_shards)
    what = (f"batch {batch_id} was computed again with other records than its first attempt in shards {differ} "
            f"(rows {first.records_per_shard}, then {list(rerun.rows_per_shard)}): the query is not deterministic.")
    if mixed and settings.on_rerun_mismatch == "fail":
        raise RerunMismatch(
            f"{what} Shards {committed_shards} published the first attempt's records; the others would publish "
            "this one's, and the batch would come from two computations. Nothing more was published. Make the "
            "query deterministic (a timestamp, a random number or an unordered collection in a value is not), or "
            'set on_rerun_mismatch = "warn" to publish the other shards from this computation.')
    outcome = (f" Shards {committed_shards} had already published the first attempt's records, the others "
               "publish this one's: the batch's shards now come from two computations." if mixed else
               " Nothing of the re-run is published where the first attempt was." if first.status is COMMITTED
               else "")
    log.error("%s%s", what, outcome, extra=event("rerun_mismatch", batch_id=batch_id, shards=differ,
                                                   shards_published_before=committed_shards, two_computations=mixed))


def source_offsets_went_back(batch_id: int, before: LogEntry, decision: Decision) -> SourceOffsetsWentBack:
    """The refusal of a batch whose source offsets are behind those of the batch before it
    (`before`) in a partition (decision.problems): a partition that goes back or disappears would
    have its records counted twice, or be read from another topic's history (a topic deleted and
    created again)."""
    return SourceOffsetsWentBack(
        f"batch {batch_id}: its source offsets go back from batch {before.batch_id}'s: "
        + "; ".join(decision.problems) + ". Was an input topic deleted and created again? Nothing was published; "
        "start on a new checkpoint_location (with starting_offsets where it should begin) and a new sink_id.")


def publish_from_driver(settings: SinkSettings, records: BatchRecords, batch_id: int, pending: tuple[int, ...],
                        source_offsets: str, pool: ProducerPool, shards: list[CommitShard]) -> Counter[str]:
    """Steps 3 and 4 on the driver, shard after shard, with the pool's producers."""
    published: Counter[str] = Counter()
    for shard in shards:
        if shard.shard in pending:
            published += run_shard_transaction(settings, shard, chunks_of(records, shard.shard), batch_id,
                                               source_offsets)
            pool.committed(settings, ShardState(shard.shard, shard.transactional_id, batch_id, source_offsets))
    return published


def publish_from_tasks(settings: SinkSettings, records: DistributedRecords, batch_id: int, pending: tuple[int, ...],
                       source_offsets: str, pool: ProducerPool) -> Counter[str]:
    """Steps 3 and 4 in the publishing job's tasks, one per shard (publishing_tasks.py). Every
    task answers with a row; a shard published by a task becomes its new state, and the gravest
    of the failures the tasks met fails the batch, raised as the task met it."""
    brief = tasks.TaskBrief(settings, batch_id, frozenset(pending),
                               tuple(ShardFigures(rows, digest) for rows, digest
                                     in zip(records.rows_per_shard, records.digests, strict=True)),
                               source_offsets, faults.DriverFaults.of_driver())
    try:
        rows = records.by_shard().mapInArrow(tasks.publish_task(brief), tasks.RESULT_DDL).collect()
    except (Py4JJavaError, CapturedException) as error:  # a task that could not answer: its worker or executor died
        java = getattr(error, "java_exception", None)
        message = (str(java.getMessage()) if java is not None else str(error)).strip().splitlines()[0][:500]
        raise CommitFailed(f"batch {batch_id}: the publishing job failed: {message}") from error
    results = {result.shard: result for result in (tasks.ShardResult.of_row(row.asDict()) for row in rows)}
    published: Counter[str] = Counter()
    failures: list[JobFailure] = []
    for shard in pending:
        result = results.get(shard)
        if result is None:
            raise CommitFailed(f"batch {batch_id}: the publishing job returned nothing for shard {shard}")
        if result.failure is not None:
            failures.append(result.failure)
            continue
        published.update(result.published)
        pool.committed(settings, ShardState(shard, settings.transactional_id(shard), batch_id, source_offsets))
    if failures:
        gravest = max(failures, key=lambda failure: _GRAVITY.index(failure.outcome))
        for failure in failures:
            if failure is not gravest:
                log.warning("batch %d: a publishing task failed too: %s", batch_id, failure)
        raise gravest
    return published


# Outcomes from the mildest to the gravest: of several failed shards, the gravest decides.
_GRAVITY = (Outcome.RIDE_OUT, Outcome.REBUILD, Outcome.RETRY, Outcome.ASKED_TO_STOP, Outcome.TAKEN_OVER,
            Outcome.FIX_SETTING, Outcome.CANNOT_CONTINUE)
