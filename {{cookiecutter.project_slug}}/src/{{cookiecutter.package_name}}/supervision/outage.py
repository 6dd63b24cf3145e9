"""A Kafka outage is waited out, not counted as a failure.

While a trigger runs longer than a few seconds, the runner asks Kafka whether it answers
(`watch`): Spark's Kafka source and the sink's producers retry in place while brokers are down,
so the batch simply waits; the runner says so once every few seconds (the clients' own warnings
are silenced), and past the tolerance it stops the query, which counts as a failure.

When the query fails while Kafka cannot be reached (or with an error whose verdict is to ride it
out: time-outs, transport failures, no leader, by Kafka's error code or the Java client's
exception type, failures.py), the runner asks `ride_out`: it waits for the brokers to answer
again, logging every few seconds, and then the query starts again from its checkpoint (Spark
re-runs the batch it was in; the sink's markers make the re-run publish once). Only when the
outage lasts longer than `kafka_outage_tolerance_seconds` does the restart strategy see a failure.
The tolerance runs from the first such failure since the last batch that completed, so a broker
that keeps timing out while it answers metadata requests is a failure once the tolerance is spent.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from ..config import JobConfig
from ..failures import FailureVerdict, KafkaUnreachable, Outcome
from ..kafka.client import librdkafka_config
from ..observability.logs import event
from ..waiting import LOG_EVERY_SECONDS, Tolerance

log = logging.getLogger(__name__)

PROBE_TIMEOUT_SECONDS = 5.0
WATCH_AFTER_SECONDS = 5.0  # a trigger running this long makes the runner ask Kafka
RETRY_AFTER_ERROR_SECONDS = 2.0


def kafka_reachable(config: JobConfig, timeout: float = PROBE_TIMEOUT_SECONDS) -> bool:
    """Whether the brokers answer a metadata request for the input topic now (a new client each
    time: no cached metadata)."""
    admin = AdminClient(librdkafka_config(config.bootstrap_servers, config.kafka, {"log_level": 2}))
    try:
        topics = admin.list_topics(config.input_topic, timeout=timeout).topics
        topic = topics.get(config.input_topic)
        return topic is not None and topic.error is None and bool(topic.partitions)
    except KafkaException:
        return False


class OutageTolerance:
    def __init__(self, config: JobConfig, stop: threading.Event) -> None:
        self.config = config
        self.stop = stop
        self.tolerance = config.kafka_outage_tolerance_seconds
        # Its `since`: when the current outage was first seen.
        self.outage = Tolerance("waiting, the checkpoint keeps the batch", self.tolerance, stop,
                                event_kind="kafka_unreachable")
        self.probed = 0.0
        self.answered = 0.0  # when a probe last found Kafka answering

    @property
    def since(self) -> float | None:
        return self.outage.since

    def batch_completed(self) -> None:
        self.outage.reset()

    def heartbeat_details(self) -> dict[str, float]:
        """For the driver's heartbeat: how long the outage being waited out has lasted, if one is
        (`status --check` reads it when it cannot ask Kafka itself)."""
        since = self.since
        return {} if since is None else {"kafka_unreachable_seconds": round(time.monotonic() - since, 1)}

    def watch(self, trigger_seconds: float) -> None:
        """Called every second by the runner with how long the running trigger has taken."""
        now = time.monotonic()
        if self.tolerance <= 0 or trigger_seconds < WATCH_AFTER_SECONDS or now - self.probed < LOG_EVERY_SECONDS:
            return
        self.probed = now
        if kafka_reachable(self.config):
            self.answered = now
            if self.since is not None:
                log.warning("Kafka answers again after %.0fs; the batch goes on", now - self.since)
                self.outage.reset()
            return
        self.outage.since = self.since or max(now - trigger_seconds, self.answered)  # the earliest it can have begun
        waited = self.outage.waited()
        if waited > self.tolerance:
            raise KafkaUnreachable(f"Kafka unreachable at {self.config.bootstrap_servers} for {waited:.0f}s, past "
                                   f"kafka_outage_tolerance_seconds ({self.tolerance:.0f})")
        log.warning("Kafka unreachable at %s for %.0fs (tolerance %.0fs): the batch waits in place",
                    self.config.bootstrap_servers, waited, self.tolerance,
                    extra=event("kafka_unreachable", seconds=round(waited), tolerance_seconds=self.tolerance))

    def ride_out(self, judged: FailureVerdict) -> bool:
        """True when the failure was a Kafka outage that ended within the tolerance: restart
        without counting it. False: a failure for the restart strategy (or a stop was asked).
        Kafka is asked whether it answers whatever the failure; one that answers is an outage
        only if the failure's verdict says so."""
        if self.tolerance <= 0:
            return False
        reachable = kafka_reachable(self.config)
        if reachable and judged.outcome is not Outcome.RIDE_OUT:
            return False
        self.outage.since = self.since or time.monotonic()
        log.warning("query failed while Kafka %s: %s", "reports errors" if reachable else "is unreachable",
                    judged.line)
        if reachable and self.stop.wait(RETRY_AFTER_ERROR_SECONDS):  # answers, but failed to serve: a pause
            return False
        while not reachable:
            if not self.outage.pause(f"Kafka unreachable at {self.config.bootstrap_servers}", 1.0):
                if not self.stop.is_set():
                    log.error("Kafka unreachable for %.0fs, past kafka_outage_tolerance_seconds (%.0f)",
                              self.outage.waited(), self.tolerance)
                return False
            reachable = kafka_reachable(self.config)
        waited = self.outage.waited()
        if waited > self.tolerance:
            log.error("Kafka errors for %.0fs, past kafka_outage_tolerance_seconds (%.0f)", waited, self.tolerance)
            return False
        log.warning("Kafka answers again (%.0fs after the first failure); the query starts again from its checkpoint",
                    waited)
        return True
