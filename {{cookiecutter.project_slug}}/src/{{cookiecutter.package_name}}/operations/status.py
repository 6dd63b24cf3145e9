"""`status`: the last committed batches with their offsets, the sink log and the input lag; as
text, as JSON (`--json`), or as a health check for an orchestrator (`--check`: exit 1 when the
job is stuck or falling behind, or gone while Kafka cannot be asked)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from ..config import JobConfig
from ..kafka.client import librdkafka_config
from ..sink import SinkLog
from ..storage import checkpoint
from ..storage.driver_presence import running_driver
from ..storage.files import resolve_location


def input_lag(config: JobConfig, committed: dict[str, int]) -> dict[str, int]:
    consumer = Consumer(librdkafka_config(config.bootstrap_servers, config.kafka,
                                          {"group.id": "status", "isolation.level": "read_committed"}))
    try:
        metadata = consumer.list_topics(config.input_topic, timeout=10).topics[config.input_topic]
        lag = {}
        for partition in sorted(metadata.partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(config.input_topic, partition), timeout=10)
            lag[str(partition)] = max(0, high - committed.get(str(partition), 0))
        return lag
    finally:
        consumer.close()


def report(config: JobConfig, batches: int = 5, now: float | None = None) -> dict[str, Any]:
    """What `status` shows, as data. The lag is None (with `lag_error`) when Kafka cannot be asked;
    `driver` is the heartbeat of a driver running on the checkpoint, None when none is."""
    now = now or time.time()
    location = resolve_location(config.checkpoint_location)
    committed = checkpoint.committed_batches(location)
    last = committed[-1] if committed else None
    recent = [{"batch": batch_id, "end_offsets": checkpoint.input_offsets(location, batch_id, config.input_topic)}
              for batch_id in committed[-batches:]]
    written = checkpoint.commit_time(location, last) if last is not None else None
    result: dict[str, Any] = {
        "checkpoint": location,
        "committed_batches_retained": len(committed),
        "last_committed_batch": last,
        "last_committed_at": written,
        "last_batch_age_seconds": None if written is None else round(now - written, 1),
        "batches": recent,
        "sink": {"id": config.sink_id, "guarantee": config.delivery_guarantee, "log": []},
        "driver": driver_status(location, now),
        "kafka_outage_tolerance_seconds": config.kafka_outage_tolerance_seconds,
    }
    if config.exactly_once:
        result["sink"]["log"] = [{"batch": e.batch_id, "status": e.status, "records": e.records,
                                  "transactional_ids": e.transactional_ids}
                                 for e in SinkLog(location, config.sink_id).latest(batches)]
    try:
        ends = checkpoint.input_offsets(location, last, config.input_topic) if last is not None else {}
        lag = input_lag(config, ends)
        result.update(lag=lag, lag_total=sum(lag.values()))
    except Exception as error:  # noqa: BLE001 - status still reports what the checkpoint holds
        result.update(lag=None, lag_total=None, lag_error=str(error))
    return result


def driver_status(location: str, now: float) -> dict[str, Any] | None:
    """The driver running on the checkpoint (its heartbeat), the outage it reports aged with it."""
    beat = running_driver(location, now)
    if beat is None:
        return None
    age = now - float(beat.get("at", now))
    outage = beat.get("kafka_unreachable_seconds")
    return {"host": beat.get("host"), "pid": beat.get("pid"), "heartbeat_age_seconds": round(age, 1),
            "kafka_unreachable_seconds": None if outage is None else round(float(outage) + age, 1)}


def problems(status: dict[str, Any], max_batch_age: float | None, max_lag: int | None) -> list[str]:
    """Why the job is unhealthy, empty when it is not. Stuck: input is waiting and no batch was
    committed for `max_batch_age` seconds (an idle job with no input commits no batch, and is
    healthy). Falling behind: more than `max_lag` records wait.

    Without a lag figure (Kafka cannot be asked) neither can be judged. A driver running on the
    checkpoint waits out a Kafka outage for kafka_outage_tolerance_seconds and then fails by
    itself, so the check passes while its heartbeat is fresh and the outage it reports is within
    that tolerance: a liveness probe does not restart a driver for an outage it rides out."""
    lag = status.get("lag_total")
    if lag is None:
        return _problems_without_lag(status)
    found = []
    if max_lag is not None and lag > max_lag:
        found.append(f"falling behind: {lag} records wait (limit {max_lag})")
    age = status.get("last_batch_age_seconds")
    if max_batch_age is not None and lag > 0:
        if age is None:
            found.append("stuck: input waits and no batch was ever committed")
        elif age > max_batch_age:
            found.append(f"stuck: input waits and the last batch was committed {age:.0f}s ago "
                         f"(limit {max_batch_age:g}s)")
    return found


def _problems_without_lag(status: dict[str, Any]) -> list[str]:
    unknown = f"input lag unknown ({status.get('lag_error') or 'Kafka did not answer'})"
    driver = status.get("driver")
    if driver is None:
        return [f"{unknown} and no driver is running on the checkpoint"]
    tolerance = float(status.get("kafka_outage_tolerance_seconds") or 0)
    outage = driver.get("kafka_unreachable_seconds")
    if outage is not None and outage > tolerance:
        return [f"{unknown}; the driver has found Kafka unreachable for {outage:.0f}s, past "
                f"kafka_outage_tolerance_seconds ({tolerance:.0f})"]
    return []


def print_status(status: dict[str, Any]) -> None:
    print(f"checkpoint {status['checkpoint']}: {status['committed_batches_retained']} committed batches retained, "
          f"last {[status['last_committed_batch']] if status['last_committed_batch'] is not None else 'none'}"
          + (f", {status['last_batch_age_seconds']}s ago" if status["last_batch_age_seconds"] is not None else ""))
    for batch in status["batches"]:
        print(f"  batch {batch['batch']}: source end offsets {batch['end_offsets']}")
    sink = status["sink"]
    if sink["guarantee"] == "exactly-once":
        print(f"sink {sink['id']!r} ({sink['guarantee']}) log:")
        for entry in sink["log"]:
            print(f"  batch {entry['batch']}: {entry['status']}, {entry['records']} records, "
                  f"transactional ids {entry['transactional_ids']}")
    else:  # its tasks produce straight to Kafka: Spark's commit log above is the only record
        print(f"sink {sink['id']!r} ({sink['guarantee']}): no sink log")
    driver = status["driver"]
    if driver is None:
        print("driver: none running on the checkpoint (no fresh heartbeat)")
    else:
        print(f"driver: pid {driver['pid']} on {driver['host']}, heartbeat {driver['heartbeat_age_seconds']}s ago"
              + ("" if driver["kafka_unreachable_seconds"] is None
                 else f", waiting out a Kafka outage for {driver['kafka_unreachable_seconds']:.0f}s"))
    if status["lag"] is None:
        print(f"input lag: unavailable ({status['lag_error']})")
    else:
        print(f"input lag per partition: {status['lag']} (total {status['lag_total']})")
