"""Start-up checks: each failure names the configuration option to fix."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from ..config import ConfigError, JobConfig
from ..failures import FailureVerdict, JobFailure, Outcome, StoppedForGood
from ..kafka import permissions
from ..kafka.client import cluster_topics
from ..pipeline import query
from ..pipeline.fingerprint import fingerprint
from ..pipeline.parsing import event_schema
from ..savepoints.pinned_query import check_and_pin as check_and_pin_query
from ..sink import check_start
from ..storage import checkpoint, object_store
from ..storage.files import resolve_location
from ..waiting import Tolerance

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

    def gave_up(judged: FailureVerdict, waited: float) -> BaseException:
        return StoppedForGood(f"Kafka at {servers} in an outage for {waited:.0f}s at start-up, past "
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
    answers = [(f"routes.{route}", topic) for route, topic in config.routes.items()] if config.route else \
        [("output_topic", config.output_topic)]
    needs = [("input_topic", config.input_topic, permissions.SOURCE),
             *((option, name, permissions.OUTPUT) for option, name in answers),
             ("dead_letter_topic", config.dead_letter_topic, permissions.OUTPUT)]
    access = permissions.topic_access(config.bootstrap_servers, config.kafka, (name for _, name, _ in needs))
    for option, name, needed in needs:
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


def check_pinned_query(config: JobConfig) -> None:
    """The checkpoint's state was computed by the query the job now runs (pipeline/fingerprint.py).
    A query without state may change from one run to the next: nothing to pin, but its model must
    still run on the configured schema."""
    computes = fingerprint(config)
    if not query.KEEPS_STATE:
        return
    if check_and_pin_query(resolve_location(config.checkpoint_location), computes):
        log.warning("the checkpoint had no record of its query: the query now is taken as the one it was made by")


def check_sink(config: JobConfig) -> None:
    """The sink's checks against Kafka and the checkpoint: no Spark needed. Kafka in an outage
    is waited out (outages_waited_out): the checks run again once it answers."""
    outages_waited_out(config, lambda: _check_sink(config))


def _check_sink(config: JobConfig) -> None:
    check_start(config)
    check_pinned_query(config)


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
