"""What the job's Kafka principal must be allowed (the README's Kafka ACLs), checked at start-up
against Kafka's own answer: the operations the brokers' authorizer allows it on each topic
(DescribeTopics with the authorized operations), and on the sink's transactional ids (a producer
that starts transactions with an id of theirs). A refusal names the option, the operation and the
resource in one line, before anything is published. Brokers without an authorizer allow
everything and say so; brokers that do not say are not second-guessed."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka.admin import AdminClient

from ..failures import ConfigError, Outcome, kafka_outcome
from .client import librdkafka_config

# Kafka's ACL operations each topic needs (DESCRIBE comes with any of them).
SOURCE = frozenset({"READ"})
OUTPUT = frozenset({"WRITE"})
# The sink reads its markers back at every start, writes one per batch, and checks the topic's
# cleanup policy; CREATE only where it has to create the topic.
MARKERS = frozenset({"READ", "WRITE", "DESCRIBE_CONFIGS"})
AUTHORIZATION_FAILED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                                  KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})


@dataclass(frozen=True)
class TopicAccess:
    described: bool  # False: Kafka refused even a DESCRIBE (no ACL allows anything there), or no such topic
    exists: bool
    allowed: frozenset[str] | None  # the operations allowed; None: the brokers did not say

    def missing(self, needed: Iterable[str]) -> list[str]:
        if not self.described:
            return sorted(needed)
        return [] if self.allowed is None else sorted(set(needed) - self.allowed)


def topic_access(bootstrap_servers: str, settings: Mapping[str, str] | None, names: Iterable[str],
                 timeout: float = 10.0) -> dict[str, TopicAccess]:
    """Per topic: whether it exists and what the principal may do on it."""
    admin = AdminClient(librdkafka_config(bootstrap_servers, settings))
    futures = admin.describe_topics(TopicCollection(sorted(set(names))), request_timeout=timeout,
                                    include_authorized_operations=True)
    access = {}
    for name, future in futures.items():
        try:
            described = future.result(timeout=timeout)
        except KafkaException as error:
            code = error.args[0].code()
            if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                access[name] = TopicAccess(described=True, exists=False, allowed=None)
            elif code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                access[name] = TopicAccess(described=False, exists=False, allowed=frozenset())
            else:
                raise
            continue
        operations = described.authorized_operations
        allowed = frozenset(getattr(op, "name", str(op)) for op in operations) if operations else None
        access[name] = TopicAccess(described=True, exists=True, allowed=allowed)
    return access


def principal(settings: Mapping[str, str] | None) -> str:
    user = (settings or {}).get("sasl.username")
    return f"Kafka principal User:{user}" if user else "the job's Kafka principal"


def refused(option: str, settings: Mapping[str, str] | None, topic: str, access: TopicAccess,
            missing: list[str]) -> ConfigError:
    """The one-line refusal: who may not do what on which topic."""
    why = "" if access.described else (" (Kafka refuses it even a DESCRIBE there: no ACL allows it anything on "
                                       "the topic, or the topic does not exist)")
    return ConfigError(option, f"{principal(settings)} may not {' or '.join(missing)} topic {topic!r}{why}; "
                               "grant it with an ACL (README: Kafka ACLs)")


def may_write_transactional_id(bootstrap_servers: str, settings: Mapping[str, str] | None, transactional_id: str,
                               timeout: float = 15.0) -> bool | None:
    """Whether the principal may use `transactional_id` (WRITE on it), which Kafka tells only to a
    producer that starts transactions: one does, with that id, and stops. None: no answer (a
    broker error that is no outage); the sink's own producers will meet the same at the first batch.
    Kafka in an outage (a time-out, no coordinator) is raised: the start-up checks wait it out."""
    producer = Producer(librdkafka_config(bootstrap_servers, settings, {
        "transactional.id": transactional_id,
        # librdkafka's lines go to a logger, served only by poll(), which this producer never calls:
        # the refusal is the caller's one line, not librdkafka's fatal-error line beside it.
        "logger": logging.getLogger(__name__)}))
    try:
        producer.init_transactions(timeout)
        return True
    except KafkaException as error:
        if error.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return False
        if kafka_outcome(error.args[0])[0] is Outcome.RIDE_OUT:
            raise
        return None


def transactional_ids_refused(settings: Mapping[str, str] | None, prefix: str) -> ConfigError:
    return ConfigError("transactional_id_prefix", transactional_ids_refusal(settings, prefix))


def transactional_ids_refusal(settings: Mapping[str, str] | None, prefix: str) -> str:
    """What the one line says when Kafka refuses the principal the sink's transactional ids."""
    return (f"{principal(settings)} may not WRITE the transactional ids {prefix}*; grant WRITE on transactional ids "
            "with that prefix (README: Kafka ACLs)")
