"""What the sink is told: built from the job's configuration (settings_for), which holds the one
set of defaults; nothing here has a default of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import JobConfig

# A record's headers, as confluent-kafka takes them.
Headers = list[tuple[str, str | bytes | None]]

# The Java client's partitioner: a key lands where Kafka Streams and Java producers put it (so
# consumers co-partition), and an empty key is hashed like any other instead of spread at random.
PARTITIONER = "murmur2_random"
# One transaction's budget, in commit time-outs: producing and flushing, then committing with retries.
COMMIT_ATTEMPTS_TIMEOUTS = 3


def transactional_ids(prefix: str, sink_id: str) -> str:
    """What every transactional id of a sink starts with (the ACL's prefix, README: Kafka ACLs)."""
    return f"{prefix}-{sink_id}-"


def transaction_timeout_ms(commit_timeout_seconds: float) -> int:
    """Longer than everything one transaction may take (produce and flush, then commit retries:
    at most COMMIT_ATTEMPTS_TIMEOUTS commit time-outs in all), so the broker never aborts a
    transaction the coordinator is still working on."""
    return int(commit_timeout_seconds * (COMMIT_ATTEMPTS_TIMEOUTS + 1) * 1000)


@dataclass(frozen=True)
class SinkSettings:
    bootstrap_servers: str
    checkpoint: str
    sink_id: str
    transactional_id_prefix: str
    marker_topic: str
    shards: int
    commit_timeout_seconds: float
    client: dict[str, str]  # the user's [kafka] settings
    # How long a batch waits for another producer's open transaction on the marker topic (marker.py).
    foreign_transaction_tolerance_seconds: float = 0.0
    # Where phase 2 runs: "auto" (the driver for a small batch, Spark tasks otherwise), "tasks", "driver".
    publish_from: str = "auto"
    # A re-run whose records differ from a first attempt that published some shards: "fail" stops
    # the job before the other shards publish, "warn" publishes them (coordinator.check_rerun).
    on_rerun_mismatch: str = "fail"
    # The batch id this checkpoint's batch 0 publishes as: 0, or after a savepoint the one that
    # continues the numbering of the checkpoint it came from (savepoints/origin.py).
    first_batch_id: int = 0
    # The topics whose values are Avro records (formats/avro_output.py): their batch id is appended
    # as the record's last field, a long; every other value is a JSON object (batch_records.stamped_values).
    avro_topics: frozenset[str] = frozenset()
    # The topics whose values are Protobuf messages (formats/protobuf_output.py), each with the
    # number of its `batch_id` field, which is appended to each message.
    protobuf_topics: dict[str, int] = field(default_factory=dict)

    def output_batch_id(self, batch_id: int) -> int:
        """The batch id Spark's batch `batch_id` publishes as, in its records' values and headers."""
        return self.first_batch_id + batch_id

    def batch_header(self, batch_id: int) -> Headers:
        """The `batch_id` header of a batch's records: the id their values carry."""
        return [("batch_id", str(self.output_batch_id(batch_id)).encode())]

    def transactional_id(self, shard: int) -> str:
        """Stable across restarts: the next driver's producer fences this one's."""
        return f"{transactional_ids(self.transactional_id_prefix, self.sink_id)}{shard}"


def settings_for(config: JobConfig, first_batch_id: int = 0, protobuf_batch_id_number: int = 0) -> SinkSettings:
    """What the sink is told, from the configuration; `first_batch_id`: where the output's batch ids
    start (savepoints.first_batch_id, for a checkpoint started from a savepoint);
    `protobuf_batch_id_number`: for Protobuf output, its `batch_id` field's number (the schema's)."""
    from ..storage.files import resolve_location  # pyarrow's: not for every reader of the settings

    return SinkSettings(
        bootstrap_servers=config.bootstrap_servers,
        checkpoint=resolve_location(config.checkpoint_location),
        sink_id=config.sink_id,
        transactional_id_prefix=config.transactional_id_prefix,
        marker_topic=config.marker_topic,
        shards=config.commit_shards,
        commit_timeout_seconds=config.commit_timeout_seconds,
        publish_from=config.publish_from,
        on_rerun_mismatch=config.on_rerun_mismatch,
        client=dict(config.kafka),
        foreign_transaction_tolerance_seconds=config.foreign_transaction_tolerance_seconds,
        first_batch_id=first_batch_id,
        avro_topics=frozenset({config.output_topic} if config.output_format == "avro" else ()),
        protobuf_topics={config.output_topic: protobuf_batch_id_number} if config.output_format == "protobuf" else {},
    )
