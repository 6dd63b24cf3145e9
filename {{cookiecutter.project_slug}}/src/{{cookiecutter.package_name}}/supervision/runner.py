"""Supervision: run the query, log progress, restart it after a failure as the restart
strategy says, and stop cleanly at a batch boundary on SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from .. import failures
from ..config import JobConfig, RestartStrategyKind
from ..failures import CannotContinue, ConfigError, JobFailure, KafkaUnreachable, Outcome, StoppedForGood, TakenOver
from ..observability import metrics
from ..observability.logs import event
from ..savepoints import Origin
from ..sink import BatchPublished, KafkaSink
from ..startup import preflight
from ..startup.startup import StartupTimes
from ..storage.checkpoint import kafka_offsets
from ..storage.files import resolve_location
from ..waiting import poll
from .heartbeat import Heartbeat
from .outage import OutageTolerance
from .progress_reports import ProgressReports

log = logging.getLogger(__name__)

# The query's writer and its sink, for a session, the configuration, the origin and the sink's gate
# (the caller's: job.build_query).
QueryBuilder = Callable[[SparkSession, JobConfig, Origin | None, threading.Event | None],
                        tuple[DataStreamWriter, KafkaSink]]


@dataclass
class RestartStrategy:
    """Flink's strategies: fixed-delay (at most `attempts` restarts), exponential-backoff
    (delay doubles up to a maximum, at most `attempts`), failure-rate (at most `attempts`
    failures within `interval`), none."""

    kind: RestartStrategyKind
    attempts: int
    delay: float
    max_delay: float
    interval: float
    failures: deque[float] = field(default_factory=deque)

    @classmethod
    def from_config(cls, config: JobConfig) -> RestartStrategy:
        return cls(config.restart_strategy, config.restart_attempts, config.restart_delay_seconds,
                   config.restart_max_delay_seconds, config.failure_rate_interval_seconds)

    def next_delay(self, now: float) -> float:
        """Record a failure; return the delay before the restart, or raise StoppedForGood. For
        fixed-delay and exponential-backoff, a run healthy for `interval` since the last
        failure starts the count afresh: a job that fails once a week is not given up."""
        if self.kind != "failure-rate" and self.failures and now - self.failures[-1] > self.interval:
            self.failures.clear()
        self.failures.append(now)
        if self.kind == "none":
            raise StoppedForGood("restart_strategy is none")
        if self.kind == "failure-rate":
            while self.failures and self.failures[0] < now - self.interval:
                self.failures.popleft()
            if len(self.failures) > self.attempts:
                raise StoppedForGood(f"{len(self.failures)} failures within {self.interval:.0f}s "
                                     f"(at most {self.attempts})")
            return self.delay
        if len(self.failures) > self.attempts:
            raise StoppedForGood(f"{len(self.failures)} failures; restart_attempts is {self.attempts}")
        if self.kind == "exponential-backoff":
            return min(self.delay * 2 ** (len(self.failures) - 1), self.max_delay)
        return self.delay


class StopRequested:
    """Set by SIGTERM/SIGINT; the runner stops between batches."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.event.set())


def stop_at_batch_boundary(query: StreamingQuery, stopping: threading.Event | None = None,
                           timeout: float = 120.0) -> None:
    """Stop between two batches: no batch is cut in half. `stopping`: the sink's gate
    (KafkaSink): once set, a batch that reaches the sink ends the query before it publishes
    anything (it stays planned; the next start runs it), so a query that is never idle (the TTL
    count runs no-data batches back to back) stops after the batch running now. Without a gate,
    or until the query stops, wait for a moment with no batch running, then stop."""
    if stopping is not None:
        stopping.set()
    poll(lambda: query.isActive and query.status.get("isTriggerActive"), lambda running: not running, timeout,
         pause=0.05)
    query.stop()


def describe_progress(progress: dict, lag: dict[tuple[str, str], int] | None) -> str:
    return (
        f"batch {progress.get('batchId')}: {progress.get('numInputRows', 0)} records in "
        f"{progress.get('durationMs', {}).get('triggerExecution', 0)} ms, "
        f"{progress.get('processedRowsPerSecond') or 0:.0f} records/s, lag {'?' if lag is None else sum(lag.values())}"
    )


def batch_event(progress: dict, lag: dict[tuple[str, str], int] | None, config: JobConfig,
                published: BatchPublished | None) -> dict:
    """The batch's log event: Spark's progress, and what the sink published for it (exactly-once)."""
    fields = {
        "batch_id": progress.get("batchId"),
        "input_rows": progress.get("numInputRows", 0),
        "duration_ms": progress.get("durationMs", {}),
        "lag": None if lag is None else sum(lag.values()),
        "lag_per_partition": None if lag is None else {f"{t}/{p}": n for (t, p), n in sorted(lag.items())},
    }
    if published is not None:
        fields.update(output_records=sum(published.records_per_topic.get(topic, 0) for topic in config.answer_topics),
                      dead_letters=published.records_per_topic.get(config.dead_letter_topic, 0),
                      phase1_ms=round(published.phase1_seconds * 1000, 1),
                      phase2_ms=round(published.seconds * 1000, 1), published_from=published.published_from)
    return event("batch", **fields)


def lag_per_partition(progress: dict) -> dict[tuple[str, str], int] | None:
    """Records each input partition had beyond the batch's end (Spark's latestOffset − endOffset)."""
    source = (progress.get("sources") or [{}])[0]
    latest, end = kafka_offsets(source.get("latestOffset")), kafka_offsets(source.get("endOffset"))
    if latest is None or end is None:
        return None
    return {(topic, p): max(0, offset - end.get(topic, {}).get(p, 0))
            for topic, partitions in latest.items() for p, offset in partitions.items()}


def run(spark: SparkSession, config: JobConfig, build_query: QueryBuilder, stop: StopRequested | None = None,
        until_idle_batches: int | None = None, origin: Origin | None = None,
        startup: StartupTimes | None = None, sink_checks: Future[None] | None = None) -> None:
    """Run and supervise the query until stopped, or (with `until_idle_batches`) until that many
    consecutive triggers found no new input after one that did (three times as many if none did).
    `config`: as the checkpoint runs it; `build_query`: the query (job.build_query); `origin`: the
    savepoint it started from, if any (savepoints.apply_origin); `startup`: the start's steps so
    far, logged with the first batch; `sink_checks`: the start-up checks the caller began
    (preflight.run_all)."""
    stop = stop or StopRequested()
    startup = startup or StartupTimes()
    strategy = RestartStrategy.from_config(config)
    outage = OutageTolerance(config, stop.event)
    preflight.run_all(spark, config, sink_checks)
    startup.step("preflight")
    lost: list[str] = []
    taken_over: list[str] = []

    def heartbeat_lost(reason: str) -> None:
        log.error("stopping at the next batch boundary: %s", reason)
        lost.append(reason)
        stop.event.set()

    def superseded(reason: str) -> None:
        log.error("stopping at the next batch boundary: %s", reason)
        taken_over.append(reason)
        stop.event.set()

    heartbeat = Heartbeat(resolve_location(config.checkpoint_location), lambda reason: _stop_on_request(stop, reason),
                          heartbeat_lost, details=outage.heartbeat_details, on_taken_over=superseded)
    heartbeat.start()
    try:
        _run_until_stopped(spark, config, build_query, origin, stop, until_idle_batches, strategy, outage, startup,
                           heartbeat.newer_driver)
    finally:
        heartbeat.stop()
    ending = heartbeat_ending(lost, taken_over)
    if ending is not None:
        raise ending


def heartbeat_ending(lost: list[str], taken_over: list[str]) -> StoppedForGood | None:
    """What the job stops with after its heartbeat said so (taken over by a newer driver, or
    not written for too long); None: it was not the heartbeat that stopped it."""
    if taken_over:
        return TakenOver(f"stopping: {taken_over[0]}")
    if lost:
        return CannotContinue(f"stopped: {lost[0]}")
    return None


def query_failure_ending(judged: failures.FailureVerdict,
                         newer_driver: Callable[[], str | None] = lambda: None) -> JobFailure | None:
    """What the job stops with after its query failed with `judged`; None: the outage tolerance
    and the restart strategy decide (and a stop that was asked ends the run quietly).
    `newer_driver`: asked only for a failure a restart would follow (it reads the checkpoint)."""
    if judged.outcome is Outcome.TAKEN_OVER:
        return TakenOver(f"stopping: {judged.line}")
    if judged.outcome is Outcome.FIX_SETTING:
        return ConfigError(judged.option or "kafka", judged.message)
    if judged.outcome is Outcome.CANNOT_CONTINUE:
        return CannotContinue(f"stopping: {judged.line}")
    if judged.outcome is Outcome.ASKED_TO_STOP:
        return None
    try:
        newer = newer_driver()
    except OSError as error:
        # The checkpoint's store does not answer, most likely what failed the batch too: the restart
        # strategy goes on. A newer driver, if there is one, is fenced by its transactional ids or
        # found by the heartbeat once the store answers; exactly-once holds either way.
        log.warning("could not read the heartbeat after the failure (%s); the restart strategy decides", error)
        return None
    if newer is not None:  # a zombie: its restart would fence the newer driver
        return TakenOver(f"stopping: {newer}; the batch failed with {judged.line}")
    return None


def _stop_on_request(stop: StopRequested, reason: str) -> None:
    if not stop.event.is_set():
        log.info("stop requested (%s): stopping at the next batch boundary", reason)
        stop.event.set()


def _run_until_stopped(spark: SparkSession, config: JobConfig, build_query: QueryBuilder, origin: Origin | None,
                       stop: StopRequested, until_idle_batches: int | None, strategy: RestartStrategy,
                       outage: OutageTolerance, startup: StartupTimes,
                       newer_driver: Callable[[], str | None] = lambda: None) -> None:
    rebuilt_for: str | None = None  # the reason of the last rebuild (Outcome.REBUILD)
    while True:
        stopping = threading.Event()  # the sink's gate: set, no new batch publishes
        writer, sink = build_query(spark, config, origin, stopping)
        if config.exactly_once:
            sink.start_producers_meanwhile()
        query = writer.start()
        log.info("query %s started (%s, checkpoint %s)", query.id, config.delivery_guarantee,
                 config.checkpoint_location)
        startup.step("query start")
        try:
            if _supervise(query, sink, config, stop, until_idle_batches, outage, stopping, startup):
                return
        except (KafkaUnreachable, StreamingQueryException) as error:
            query.stop()
            # The sink's own exception when a batch failed in it (foreachBatch runs in this
            # process), else what Spark reports; either judged by its type.
            judged = failures.verdict(sink.take_failure() or error)
            log.debug("the query failed: %s", judged.line, exc_info=error)
            if judged.outcome is Outcome.ASKED_TO_STOP:
                return
            # Nothing of the batch is published: build the query again at once, with what it lacked.
            # The same reason twice in a row means the rebuild did not help: the restart strategy decides.
            if judged.outcome is Outcome.REBUILD and judged.message != rebuilt_for:
                rebuilt_for = judged.message
                log.warning("rebuilding the query: %s", judged.message, extra=event("rebuild", reason=judged.message))
                continue
            ending = query_failure_ending(judged, newer_driver)
            if ending is not None:
                raise ending from None
            if outage.ride_out(judged):
                continue  # a Kafka outage within the tolerance: not a failure
            if not _restarts_after_delay(strategy, judged, stop):
                return


def _restarts_after_delay(strategy: RestartStrategy, judged: failures.FailureVerdict, stop: StopRequested) -> bool:
    """A failure for the restart strategy: wait its delay; False when a stop came meanwhile."""
    log.error("query failed: %s", judged.line, extra=event("failure", error=judged.line))
    try:
        delay = strategy.next_delay(time.monotonic())
    except StoppedForGood as gave_up:
        raise StoppedForGood(f"giving up: {gave_up}; last failure: {judged.line}") from None
    log.warning("restarting the query in %.1fs", delay, extra=event("restart", delay_seconds=delay))
    return not stop.event.wait(delay)


def _supervise(query: StreamingQuery, sink: KafkaSink, config: JobConfig, stop: StopRequested,
               until_idle_batches: int | None, outage: OutageTolerance, stopping: threading.Event,
               startup: StartupTimes) -> bool:
    """Return True when the run is over (stopped, or idle as asked); raise when the query failed."""
    reports = ProgressReports()
    idle = 0
    seen_input = False
    trigger_since: float | None = None  # when the trigger that is running now started

    def read_reports() -> None:  # after the end too: the last batches before a stop or a failure
        nonlocal idle, seen_input
        for progress in reports.new(query):
            _report(progress, config, outage, sink)
            if progress.get("numInputRows", 0) > 0:
                if not startup.reported:
                    startup.first_batch(progress, sink_seconds(sink, progress))
                seen_input, idle = True, 0
            else:
                idle += 1

    while True:
        if stop.event.is_set():
            log.info("stop requested: stopping at the next batch boundary")
            stop_at_batch_boundary(query, stopping)
            read_reports()
            return True
        try:
            ended = query.awaitTermination(1)  # True once stopped; a failed query raises here instead
        except StreamingQueryException:
            read_reports()
            raise
        read_reports()
        if ended:
            return True
        # With no input at all, wait three times as long before calling the input drained.
        if until_idle_batches is not None and idle >= until_idle_batches * (1 if seen_input else 3):
            stop_at_batch_boundary(query, stopping)
            read_reports()
            return True
        now = time.monotonic()
        trigger_since = (trigger_since or now) if query.status.get("isTriggerActive") else None
        trigger_seconds = now - trigger_since if trigger_since else 0
        metrics.TRIGGER_RUNNING.labels(config.sink_id).set(trigger_seconds)
        outage.watch(trigger_seconds)


def sink_seconds(sink: KafkaSink, progress: dict) -> dict[str, float]:
    """The sink's part of a batch (exactly-once): its phase 2, and the start of its producers
    (beside the first batch: KafkaSink.start_producers_meanwhile)."""
    batch_id = progress.get("batchId")
    published = sink.published(batch_id) if isinstance(batch_id, int) else None
    if published is None:
        return {}
    return {"sink phase 1": published.phase1_seconds, "sink phase 2": published.seconds,
            "sink producers": sink.producers_start_seconds}


def _report(progress: dict, config: JobConfig, outage: OutageTolerance, sink: KafkaSink) -> None:
    """A trigger's report: metrics, the outage watch, and a log line for a batch with input."""
    lag = lag_per_partition(progress)
    if lag is not None:
        metrics.record_progress(config.sink_id, progress["batchId"], progress.get("numInputRows", 0), lag)
    outage.batch_completed()
    if progress.get("numInputRows", 0) > 0:
        batch_id = progress.get("batchId")
        published = sink.published(batch_id) if isinstance(batch_id, int) else None
        where = "" if published is None else (
            f", published from {published.published_from} (phase 1 "
            f"{published.phase1_seconds * 1000:.0f} ms, phase 2 {published.seconds * 1000:.0f} ms)")
        log.info(describe_progress(progress, lag) + where, extra=batch_event(progress, lag, config, published))
