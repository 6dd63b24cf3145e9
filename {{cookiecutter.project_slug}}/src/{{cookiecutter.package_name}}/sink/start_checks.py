"""The sink's start-up checks, against Kafka and the checkpoint, before its first batch: each
failure names the configuration option to fix. They need no Spark: a start runs them while the
JVM starts (startup/preflight.py, which also waits out a Kafka outage around them)."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from ..config import ConfigError, JobConfig
from ..kafka import permissions
from ..kafka.client import librdkafka_config
from ..storage import checkpoint
from ..storage.files import resolve_location
from .invariants import markers_went_back
from .marker import read_marker_values, read_markers
from .marker_topic import MarkerTopicUnfit, ensure_marker_topic
from .pinned_settings import PinnedSettingChanged, PinnedSettings, check_and_pin
from .recovery import markers_ahead, markers_gone_back
from .settings import COMMIT_ATTEMPTS_TIMEOUTS, transaction_timeout_ms, transactional_ids
from .sink_log import SinkLog

log = logging.getLogger(__name__)


def check_start(config: JobConfig) -> None:
    """Every check of the sink's, in order: those that no batch could pass first (the brokers'
    time-out limit, the transactional ids' ACL, the marker topic), then the checkpoint against
    what the sink published. Nothing to check for the at-least-once sink."""
    if not config.exactly_once:
        return
    check_transaction_timeout(config)
    check_transactional_ids(config)
    check_marker_topic(config)
    check_pinned_sink_settings(config)
    check_checkpoint_against_markers(config)
    check_sink_identity(config)


def check_marker_topic(config: JobConfig) -> None:
    """Create the marker topic if needed and refuse one that cannot keep the markers, or that the
    job's principal may not read, write or check."""
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
    current = PinnedSettings(sink_id=config.sink_id, marker_topic=config.marker_topic,
                             transactional_id_prefix=config.transactional_id_prefix,
                             commit_shards=config.commit_shards)
    try:
        changed = check_and_pin(resolve_location(config.checkpoint_location), current)
    except PinnedSettingChanged as error:
        raise ConfigError(str(error.option), str(error)) from None
    if changed:
        log.warning("sink settings changed since the last run (%s); no batch was in doubt", ", ".join(changed))


def check_checkpoint_against_markers(config: JobConfig) -> None:
    """A checkpoint older than what the sink published (restored from a copy) would plan new
    ranges for batches the markers say are published: they would be skipped, or published twice.
    The check is the coordinator's (recovery.markers_ahead), asked of the last planned batch."""
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
    ids = transactional_ids(config.transactional_id_prefix, config.sink_id)
    allowed = permissions.may_write_transactional_id(config.bootstrap_servers, config.kafka, f"{ids}preflight")
    if allowed is False:
        raise permissions.transactional_ids_refused(config.kafka, ids)
    if allowed is None:
        log.warning("could not check that the job may use the transactional ids %s*; the first batch will tell", ids)
