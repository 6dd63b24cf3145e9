"""Start-up checks: each failure names the configuration option to fix."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from ..config import ConfigError, JobConfig
from ..failures import GaveUp, JobFailure, Outcome, Tolerance, Verdict
from ..kafka import permissions
from ..kafka.client import cluster_topics, librdkafka_config
from ..pipeline import query
from ..pipeline.fingerprint import fingerprint
from ..pipeline.parsing import event_schema
from ..savepoints.pinned_query import check_and_pin as check_and_pin_query
from ..sink.coordinator import markers_went_back
from ..sink.marker import MarkerTopicUnfit, ensure_marker_topic, read_marker_values, read_markers
from ..sink.pinned_settings import PinnedSettingChanged, PinnedSettings, check_and_pin
from ..sink.recovery import markers_ahead, markers_gone_back
from ..sink.settings import COMMIT_ATTEMPTS_TIMEOUTS, transaction_timeout_ms, transactional_ids
from ..sink.sink_log import SinkLog
from ..storage import checkpoint, object_store
from ..storage.files import resolve_location

log = logging.getLogger(__name__)


STARTUP_RETRY_SECONDS = 2.0


class KafkaNotAnswering(JobFailure, RuntimeError):
    """No broker answers at start-up, on a checkpoint the job ran on before: an outage, waited out."""

    outcome = Outcome.RIDE_OUT


def outages_waited_out(config: JobConfig, checks: Callable[[], None]) -> None:
    """Run start-up checks; one that meets Kafka in an outage (no broker answers, a request times
    out, no controller) runs them again within kafka_outage_tolerance_seconds, so that a driver
    restarted during a rolling broker restart does not crash-loop; past it, the start fails in one line."""
    servers, seconds = config.bootstrap_servers, config.kafka_outage_tolerance_seconds

    def gave_up(judged: Verdict, waited: float) -> BaseException:
        return GaveUp(f"Kafka at {servers} in an outage for {waited:.0f}s at start-up, past "
                      f"kafka_outage_tolerance_seconds ({seconds:.0f}); last: {judged.line}")

    # Whether the checkpoint exists is asked only when a wait is said: not at every start.
    tolerance = Tolerance(lambda: "the checkpoint exists, waiting" if _has_checkpoint(config)
                          else "the start-up checks wait", seconds, event_kind="kafka_unreachable")
    tolerance.run(checks, gave_up, STARTUP_RETRY_SECONDS,
                  lambda judged: f"Kafka at {servers} in an outage ({judged.line})")


def check_kafka(config: JobConfig, timeout: float = 10.0) -> None:
    """The brokers answer and the job's topics exist. Unreachable brokers are a configuration error
    for a new checkpoint; a job whose checkpoint exists reached them before, so it is an outage:
    waited out like one (outages_waited_out)."""
    outages_waited_out(config, lambda: _check_kafka(config, timeout))


def _check_kafka(config: JobConfig, timeout: float) -> None:
    try:
        cluster_topics(config.bootstrap_servers, config.kafka, timeout)  # a ConfigError while no broker answers
    except ConfigError:
        if not _has_checkpoint(config):
            raise
        raise KafkaNotAnswering(f"Kafka unreachable at {config.bootstrap_servers}") from None
    needs = {"input_topic": permissions.SOURCE, "output_topic": permissions.OUTPUT,
             "dead_letter_topic": permissions.OUTPUT}
    access = permissions.topic_access(config.bootstrap_servers, config.kafka, (getattr(config, o) for o in needs))
    for option, needed in needs.items():
        name = getattr(config, option)
        found = access[name]
        if found.described and not found.exists:
            raise ConfigError(
                option, f"topic {name!r} does not exist on {config.bootstrap_servers}; create it first "
                "(`{{ cookiecutter.package_name }} topics create` creates the job's topics)"
            )
        if missing := found.missing(needed):
            raise permissions.refused(option, config.kafka, name, found, missing)


def _has_checkpoint(config: JobConfig) -> bool:
    """Whether the job ran on this checkpoint before (storage that cannot be read counts as no)."""
    try:
        return not checkpoint.is_new(resolve_location(config.checkpoint_location))
    except Exception:  # noqa: BLE001 - check_storage reports the storage's own problem
        return False


def check_storage(config: JobConfig) -> None:
    """A checkpoint on S3: its bucket answers, with the [s3] settings (object_store.check_bucket)."""
    if object_store.on_s3(config.checkpoint_location):
        object_store.check_bucket(config.checkpoint_location, config.s3)


def check_answer(config: JobConfig) -> None:
{%- if cookiecutter.query == "count-by-key" %}
    """pipeline/query.py's answer, before Spark starts: one its state cannot keep (pipeline/aggregates.py)
    stops the start in one line naming it."""
    from ..pipeline.steps import checked_answer

    checked_answer(config)
{%- else %}
    """This query keeps no answer per key for a state TTL to expire: a TTL is refused."""
    if config.state_ttl_seconds > 0:
        raise ConfigError("state_ttl_seconds", "a state TTL expires a key's answer, and this query keeps "
                          "{{ 'windows, which its watermark ends' if cookiecutter.query == 'windowed-count' else 'no state' }}: "
                          "set state_ttl_seconds = 0")
{%- endif %}


def check_before_spark(config: JobConfig) -> None:
    """What fails in seconds, before Spark starts: the query's operator, the broker, the topics,
    the checkpoint's storage."""
    check_answer(config)
    check_kafka(config)
    check_storage(config)


def check_filter(spark: SparkSession, config: JobConfig) -> None:
    """Analyse the filter against the event's fields, without running anything. Only the fields:
    the count's query carries nothing else past the filter (pipeline/steps.py)."""
    empty = spark.createDataFrame([], event_schema(config).fields_ddl())
    try:
        empty.where(config.filter).schema  # noqa: B018 - forces analysis
    except PySparkException as error:
        first_line = str(error).strip().splitlines()[0]
        raise ConfigError("filter", f"{config.filter!r} is not a valid Spark SQL filter: {first_line}") from None


def check_marker_topic(config: JobConfig) -> None:
    """Create the marker topic if needed and refuse one that cannot keep the markers, or that the
    job's principal may not read, write or check."""
    if not config.exactly_once:
        return
    name = config.marker_topic
    access = permissions.topic_access(config.bootstrap_servers, config.kafka, [name])[name]
    if access.exists and (missing := access.missing(permissions.MARKERS)):
        raise permissions.refused("marker_topic", config.kafka, name, access, missing)
    try:
        ensure_marker_topic(config.bootstrap_servers, name, config.kafka,
                            config.marker_replication_factor, config.marker_min_insync_replicas)
    except MarkerTopicUnfit as error:
        raise ConfigError("marker_topic", str(error)) from None
    except KafkaException as error:
        if error.args[0].code() not in permissions.AUTHORIZATION_FAILED:
            raise
        now = permissions.topic_access(config.bootstrap_servers, config.kafka, [name])[name]
        missing = (now.missing(permissions.MARKERS) or sorted(permissions.MARKERS)) if now.exists else ["CREATE"]
        raise permissions.refused("marker_topic", config.kafka, name, now, missing) from None
    if not access.exists:  # created now: what the principal may do on it
        created = permissions.topic_access(config.bootstrap_servers, config.kafka, [name])[name]
        if missing := created.missing(permissions.MARKERS):
            raise permissions.refused("marker_topic", config.kafka, name, created, missing)


def check_pinned_sink_settings(config: JobConfig) -> None:
    """The sink settings that decide an in-doubt batch's fate may change only when none is in doubt."""
    if not config.exactly_once:
        return
    current = PinnedSettings(sink_id=config.sink_id, marker_topic=config.marker_topic,
                             transactional_id_prefix=config.transactional_id_prefix,
                             commit_shards=config.commit_shards)
    try:
        changed = check_and_pin(resolve_location(config.checkpoint_location), current)
    except PinnedSettingChanged as error:
        raise ConfigError(str(error.option), str(error)) from None
    if changed:
        log.warning("sink settings changed since the last run (%s); no batch was in doubt", ", ".join(changed))


def check_pinned_query(config: JobConfig) -> None:
    """The checkpoint's state was computed by the query the job now runs (pipeline/fingerprint.py).
    A query without state may change from one run to the next: nothing to pin, but its model must
    still run on the configured schema."""
    computes = fingerprint(config)
    if not query.KEEPS_STATE:
        return
    if check_and_pin_query(resolve_location(config.checkpoint_location), computes):
        log.warning("the checkpoint had no record of its query: the query now is taken as the one it was made by")


def check_checkpoint_against_markers(config: JobConfig) -> None:
    """A checkpoint older than what the sink published (restored from a copy) would plan new
    ranges for batches the markers say are published: they would be skipped, or published twice.
    The check is the coordinator's (recovery.markers_ahead), asked of the last planned batch."""
    if not config.exactly_once:
        return
    location = resolve_location(config.checkpoint_location)
    planned = checkpoint.planned_batches(location)
    if not planned:
        return  # a new checkpoint: check_sink_identity
    # Not settled: a crash before the Kafka commit leaves this sink's own transaction open until
    # the coordinator's init_transactions aborts it; the coordinator reads settled markers then.
    markers = read_marker_values(config.bootstrap_servers, config.marker_topic, config.sink_id, config.kafka,
                                 settled=False)
    if gone_back := markers_gone_back(markers):
        shard, marker = next(iter(gone_back.items()))
        raise markers_went_back(config.sink_id, config.marker_topic, shard, marker)
    last = planned[-1]
    last_offsets = checkpoint.SourceOffsets.of_batch(location, last)
    if ahead := markers_ahead(last, last_offsets.digest(), markers):
        newest = max(marker.batch_id for marker in ahead.values())
        raise ConfigError(
            "checkpoint_location", f"{location} plans batches up to {last}, but sink {config.sink_id!r} "
            f"already published batch {newest}{' from other source offsets' if newest == last else ''}: the "
            "checkpoint is older than the output (restored from a copy?). Use the checkpoint the job last ran "
            "with, or start afresh with a new sink_id and a new checkpoint.")
    newest = max((marker.batch_id for marker in markers.values()), default=-1)
    entry = SinkLog(location, config.sink_id).read(newest) if newest >= 0 else None
    if entry is None:
        return
    offsets = last_offsets if newest == last else checkpoint.SourceOffsets.of_batch(location, newest)
    if entry.source_offsets != offsets:
        raise ConfigError(
            "checkpoint_location", f"batch {newest} was published from source offsets "
            f"{entry.source_offsets.to_json()}, but {location}/offsets/{newest} says {offsets.to_json()}: the "
            "checkpoint is not the one the job published from.")


def check_sink_identity(config: JobConfig) -> None:
    """A fresh checkpoint must not meet a sink id that already published batches: the new
    query's batch ids start at 0 again and would be taken for already-published ones."""
    if not config.exactly_once:
        return
    location = resolve_location(config.checkpoint_location)
    if not checkpoint.is_new(location):
        return
    markers = read_markers(config.bootstrap_servers, config.marker_topic, config.sink_id, config.kafka,
                           settled=False)
    if markers:
        raise ConfigError(
            "sink_id", f"sink {config.sink_id!r} already published batches up to {max(markers.values())} "
            f"(marker topic {config.marker_topic!r}), but checkpoint {location} is new. Restore the checkpoint, "
            "or give this job a new sink_id."
        )


def check_transaction_timeout(config: JobConfig, timeout: float = 15.0) -> None:
    """The sink's transaction time-out (from commit_timeout_seconds) must be one the brokers
    accept, or every transaction would be refused at the first batch."""
    if not config.exactly_once:
        return
    wanted = transaction_timeout_ms(config.commit_timeout_seconds)
    admin = AdminClient(librdkafka_config(config.bootstrap_servers, config.kafka))
    try:
        brokers = admin.list_topics(timeout=timeout).brokers
        resource = ConfigResource(ResourceType.BROKER, str(min(brokers)))
        entries = admin.describe_configs([resource])[resource].result(timeout=timeout)
        limit = int(entries["transaction.max.timeout.ms"].value)
    except (KafkaException, KeyError, ValueError) as error:  # e.g. no DescribeConfigs permission
        log.warning("could not read the brokers' transaction.max.timeout.ms (%s); not checked", error)
        return
    if wanted > limit:
        raise ConfigError(
            "commit_timeout_seconds", f"{config.commit_timeout_seconds:g}s gives transactions a time-out of "
            f"{wanted} ms, above the brokers' transaction.max.timeout.ms ({limit} ms); lower it to at most "
            f"{limit // ((COMMIT_ATTEMPTS_TIMEOUTS + 1) * 1000)}s or raise the brokers' limit")


def check_transactional_ids(config: JobConfig) -> None:
    """The sink's transactional ids must be the principal's to use (WRITE, an ACL on their prefix):
    a producer starts transactions with `<prefix>-<sink_id>-preflight`, an id of that prefix that no
    commit shard has, so no producer of the sink is fenced."""
    if not config.exactly_once:
        return
    ids = transactional_ids(config.transactional_id_prefix, config.sink_id)
    allowed = permissions.may_write_transactional_id(config.bootstrap_servers, config.kafka, f"{ids}preflight")
    if allowed is False:
        raise permissions.transactional_ids_refused(config.kafka, ids)
    if allowed is None:
        log.warning("could not check that the job may use the transactional ids %s*; the first batch will tell", ids)


def check_sink(config: JobConfig) -> None:
    """The sink's checks against Kafka and the checkpoint: no Spark needed. Kafka in an outage
    is waited out (outages_waited_out): the checks run again once it answers."""
    outages_waited_out(config, lambda: _check_sink(config))


def _check_sink(config: JobConfig) -> None:
    check_transaction_timeout(config)
    check_transactional_ids(config)
    check_marker_topic(config)
    check_pinned_sink_settings(config)
    check_pinned_query(config)
    check_checkpoint_against_markers(config)
    check_sink_identity(config)


def sink_checks_meanwhile(config: JobConfig) -> Future[None]:
    """check_sink in a thread of its own, for a start to run while the JVM starts: its round
    trips to the brokers then cost the start nothing. `config` must be the one the job runs
    (savepoints.apply_origin), on the checkpoint as it will run (after any restore)."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="preflight")
    checks = executor.submit(check_sink, config)
    executor.shutdown(wait=False)
    return checks


def run_all(spark: SparkSession, config: JobConfig, sink_checks: Future[None] | None = None) -> None:
    """Every start-up check; `sink_checks`: the caller ran check_before_spark and started
    check_sink (sink_checks_meanwhile), whose verdict is awaited here."""
    if sink_checks is None:
        check_before_spark(config)
        check_sink(config)
    else:
        sink_checks.result()  # re-raises the check's ConfigError
    check_filter(spark, config)
