"""The coordinator on a real broker, without Spark: fencing of an older driver, and a batch
that becomes visible all at once, never in part, never before its commit."""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import replace

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from {{ cookiecutter.package_name }}.failures import Outcome
from {{ cookiecutter.package_name }}.sink import coordinator, faults
from {{ cookiecutter.package_name }}.sink.batch_records import DIGEST, RECORDS_SCHEMA, SHARD, InlineRecords, chunks_of, digest
from {{ cookiecutter.package_name }}.sink.invariants import CheckpointBehindOutput, MarkersWentBack
from {{ cookiecutter.package_name }}.sink.marker import MarkersUndecided, read_marker_values, read_markers
from {{ cookiecutter.package_name }}.sink.producers import CommitShard, ProducerPool
from {{ cookiecutter.package_name }}.sink.publishing_tasks import ShardResult, TaskBrief, publish_part
from {{ cookiecutter.package_name }}.sink.settings import SinkSettings
from {{ cookiecutter.package_name }}.sink.shard_transaction import (
    ProducerFenced,
    RecomputedDifferently,
    RecordRejected,
    ShardFigures,
    run_shard_transaction,
)
from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, PREPARED, SinkLog
from {{ cookiecutter.package_name }}_tools.readback import read_topic

from harness import wait_until

pytestmark = pytest.mark.integration


def settings_for(kafka, tmp_path, new_topic, sink_id: str) -> SinkSettings:
    return SinkSettings(
        bootstrap_servers=kafka.bootstrap_servers, checkpoint=str(tmp_path / "checkpoint"), sink_id=sink_id,
        transactional_id_prefix="test", marker_topic=new_topic("markers", config={"cleanup.policy": "compact"}),
        shards=1, commit_timeout_seconds=30, client={},
    )


def batch_records(topic: str, batch_id: int, rows: int) -> InlineRecords:
    """`rows` count records of batch N, as the sink hands them to the coordinator."""
    keys = [f"k{i}" for i in range(rows)]
    return InlineRecords.of(pa.Table.from_pydict({
        "topic": [topic] * rows,
        "key": [k.encode() for k in keys],
        "value": [json.dumps({"key": k, "count": 1}).encode() for k in keys],
    }, schema=RECORDS_SCHEMA), 1)


def batch_ids_visible(kafka, topic: str) -> list[int]:
    return [json.loads(value)["batch_id"] for _key, value in read_topic(kafka.bootstrap_servers, topic)]


def test_an_older_driver_is_fenced_once_a_newer_one_started(kafka, new_topic, tmp_path):
    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "fenced")
    old = CommitShard(settings, 0)
    new = CommitShard(settings, 0)  # the restarted driver: same sink id, same transactional id
    with pytest.raises(ProducerFenced, match="uses the same sink id"):
        run_shard_transaction(settings, old, chunks_of(batch_records(output, 0, 10), 0), 0)
    run_shard_transaction(settings, new, chunks_of(batch_records(output, 1, 10), 0), 1)
    assert batch_ids_visible(kafka, output) == [1] * 10
    assert read_markers(kafka.bootstrap_servers, settings.marker_topic, "fenced") == {0: 1}


def test_a_producer_fenced_between_its_records_is_judged_fenced_not_retried(kafka, new_topic, tmp_path):
    """A newer instance fences the producer while it produces the batch's records, and its client
    turns fatal (it refuses records with `_FATAL`, "a fatal error earlier"). Whichever call meets
    it first, a record or the commit, the shard stops fenced; judged a retry, the job would
    restart and fence the newer instance back (the unit test of shard_transaction.fatal_cause
    pins the `_FATAL` path)."""
    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "fenced-midway")
    old = CommitShard(settings, 0)
    first, second = batch_records(output, 0, 10), batch_records(output, 0, 10)

    def chunks():
        yield from first.chunks(0)
        CommitShard(settings, 0)  # the newer instance
        # The old producer's next records meet the fence, and its client turns fatal.
        wait_until(lambda: fatal_refusal(old, output), 30, "the fenced producer refusing records")
        yield from second.chunks(0)

    with pytest.raises(ProducerFenced, match="uses the same sink id"):
        run_shard_transaction(settings, old, chunks, 0)


def fatal_refusal(shard: CommitShard, topic: str) -> bool:
    try:
        shard.producer.produce(topic, b"probe")
    except KafkaException as error:
        return error.args[0].code() == KafkaError._FATAL
    shard.producer.flush(1)
    return False


@pytest.mark.parametrize("partitions", [1, 3])
def test_a_batch_is_invisible_until_its_commit_then_visible_whole(kafka, new_topic, tmp_path, monkeypatch,
                                                                  partitions):
    output = new_topic("out", partitions=partitions)
    settings = settings_for(kafka, tmp_path, new_topic, f"atomic-{partitions}")
    seen_before_commit: list[int] = []

    def observe(point: str, batch_id: int) -> None:
        if point == faults.BEFORE_KAFKA_COMMIT:  # produced and flushed to the broker, not committed
            seen_before_commit.append(len(read_topic(kafka.bootstrap_servers, output)))

    monkeypatch.setattr(faults, "maybe_crash", observe)
    pool = ProducerPool()
    for batch_id in range(3):
        published = coordinator.commit_batch(settings, batch_records(output, batch_id, 5000), batch_id, pool)
        assert published is not None and published.entry.status == COMMITTED
        assert published.records_per_topic == {output: 5000}
        # The broker writes the commit markers partition by partition after the commit returns,
        # so a reader may need a moment to see the whole batch (README: the guarantee's limits).
        wait_until(lambda batch_id=batch_id: batch_ids_visible(kafka, output).count(batch_id) == 5000, 30,
                   f"the whole of batch {batch_id} visible after its commit", interval=0.2)
    assert seen_before_commit == [0, 5000, 10000], "nothing of a batch was visible before its commit"
    assert SinkLog(settings.checkpoint, settings.sink_id).batch_ids() == [0, 1, 2]


def test_a_rerun_after_the_kafka_commit_publishes_nothing(kafka, new_topic, tmp_path):
    """The crash case "Kafka committed, the log entry still says prepared": the marker decides."""
    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "rerun")
    published = coordinator.commit_batch(settings, batch_records(output, 0, 100), 0, ProducerPool())
    assert published is not None
    log = SinkLog(settings.checkpoint, settings.sink_id)
    log.fs.delete_file(f"{log.directory}/0.json")
    log.write(replace(published.entry, status=PREPARED, committed_at=None))
    # As after a driver restart: a new pool, whose producer reads the marker again.
    rerun = coordinator.commit_batch(settings, batch_records(output, 0, 100), 0, ProducerPool())
    assert rerun is not None and rerun.entry.status == COMMITTED and rerun.records_per_topic == {}
    assert batch_ids_visible(kafka, output) == [0] * 100


def java_partition(key: bytes, partitions: int) -> int:
    """Kafka's Java producer: Utils.toPositive(Utils.murmur2(key)) % partitions, written out here
    from Kafka's Utils.java so that the check does not trust librdkafka's own murmur2."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    h = (0x9747B28C ^ len(key)) & mask
    whole = len(key) // 4
    for i in range(whole):
        k = int.from_bytes(key[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = key[4 * whole:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if len(tail) >= 1:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def test_keys_land_on_the_partition_a_java_producer_would_choose(kafka, new_topic, tmp_path):
    """murmur2 like Kafka's Java client and Kafka Streams, for every key, the empty key included
    (librdkafka's default partitioner spreads an empty key at random)."""
    from confluent_kafka import Consumer, TopicPartition

    output = new_topic("out", partitions=5)
    settings = settings_for(kafka, tmp_path, new_topic, "partitioner")
    keys = [b"", b"a", b"red", b"abcd", b"colour-123", "grün".encode()]
    table = pa.Table.from_pydict({
        "topic": [output] * len(keys) * 2, "key": keys * 2, "value": [b"{}"] * len(keys) * 2,
    }, schema=RECORDS_SCHEMA)
    coordinator.commit_batch(settings, table, 0, ProducerPool())
    # Read until every record has arrived, not to each partition's end: the commit returns once the
    # coordinator decided it, and a partition's leader may take a moment more to write its commit
    # marker, until which a read_committed consumer finds that partition's end before its records.
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "partitioner-check",
                         "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(output, p, 0) for p in range(5)])
    landed: dict[bytes, set[int]] = {}
    received, deadline = 0, time.monotonic() + 300  # the wait's bound, generous: records lost, not slow
    while received < len(keys) * 2:
        if time.monotonic() > deadline:
            raise AssertionError(f"{received} of {len(keys) * 2} records arrived: {landed}")
        message = consumer.poll(1)
        if message is None or message.error():
            continue
        landed.setdefault(message.key() or b"", set()).add(message.partition())
        received += 1
    consumer.close()
    assert landed == {key: {java_partition(key, 5)} for key in keys}


def open_foreign_transaction(kafka, topic: str) -> Producer:
    """Another producer (another sink sharing the marker topic, a stuck tool) with an open transaction."""
    foreign = Producer({"bootstrap.servers": kafka.bootstrap_servers,
                        "transactional.id": f"foreign-{uuid.uuid4().hex}"})
    foreign.init_transactions(30)
    foreign.begin_transaction()
    foreign.produce(topic, key=b"another-sink/0", value=b"{}")
    foreign.flush(30)
    return foreign


def test_a_marker_behind_another_producers_open_transaction_is_still_read(kafka, new_topic, tmp_path):
    """A read to the last stable offset would stop before the marker and publish batch 0 again."""
    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "behind")
    foreign = open_foreign_transaction(kafka, settings.marker_topic)
    run_shard_transaction(settings, CommitShard(settings, 0), chunks_of(batch_records(output, 0, 10), 0), 0)
    threading.Timer(2.0, foreign.abort_transaction, args=(30,)).start()
    assert read_markers(kafka.bootstrap_servers, settings.marker_topic, "behind", timeout=30) == {0: 0}


def test_a_transaction_left_open_on_the_marker_topic_fails_the_read_clearly(kafka, new_topic, tmp_path):
    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "stuck")
    foreign = open_foreign_transaction(kafka, settings.marker_topic)
    try:
        run_shard_transaction(settings, CommitShard(settings, 0), chunks_of(batch_records(output, 0, 10), 0), 0)
        with pytest.raises(MarkersUndecided, match="another producer has been open"):
            read_markers(kafka.bootstrap_servers, settings.marker_topic, "stuck", timeout=3)
    finally:
        foreign.abort_transaction(30)


def test_a_transaction_time_out_above_the_brokers_limit_fails_at_start(kafka):
    from {{ cookiecutter.package_name }}.config import ConfigError, load_config
    from {{ cookiecutter.package_name }}.sink.start_checks import check_transaction_timeout

    def config(seconds: str):
        return load_config(None, {"bootstrap_servers": kafka.bootstrap_servers, "commit_timeout_seconds": seconds},
                           environ={})

    check_transaction_timeout(config("60"))  # 240 s: within the default 15 minutes
    with pytest.raises(ConfigError, match=r"commit_timeout_seconds.*transaction.max.timeout.ms \(900000 ms\)"):
        check_transaction_timeout(config("300"))


def test_a_record_the_client_refuses_aborts_the_transaction_and_says_why(kafka, new_topic, tmp_path):
    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "too-large")
    shard = CommitShard(settings, 0)
    table = pa.Table.from_pydict({"topic": [output, output], "key": [b"small", b"huge"],
                                  "value": [b"{}", b'{"x": "' + b"x" * 2_000_000 + b'"}']}, schema=RECORDS_SCHEMA)
    # The value as published: stamped with the batch id (`,"batch_id":0` before its closing brace).
    with pytest.raises(RecordRejected, match=r"key b'huge', 2000026 bytes.*message.max.bytes"):
        run_shard_transaction(settings, shard, chunks_of(InlineRecords.of(table, 1), 0), 0)
    # The transaction was aborted, not left open: the same producer publishes the next batch.
    run_shard_transaction(settings, shard, chunks_of(batch_records(output, 1, 10), 0), 1)
    assert batch_ids_visible(kafka, output) == [1] * 10


@pytest.mark.parametrize(("partitions", "config", "problem"), [
    (3, {"cleanup.policy": "compact"}, "it has 3 partitions, the markers need exactly 1"),
    (1, {"cleanup.policy": "delete"}, "cleanup.policy is 'delete'"),
    (1, {"cleanup.policy": "compact,delete"}, "cleanup.policy is 'compact,delete'"),
])
def test_a_marker_topic_that_cannot_keep_the_markers_fails_at_start(kafka, new_topic, partitions, config, problem):
    from {{ cookiecutter.package_name }}.config import ConfigError, load_config
    from {{ cookiecutter.package_name }}.sink.start_checks import check_marker_topic

    topic = new_topic("markers", partitions=partitions, config=config)
    job_config = load_config(None, {"bootstrap_servers": kafka.bootstrap_servers, "marker_topic": topic}, environ={})
    with pytest.raises(ConfigError, match=rf"'marker_topic'.*{problem}"):
        check_marker_topic(job_config)


def test_the_job_creates_its_marker_topic_compacted_with_one_partition(kafka):
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    from {{ cookiecutter.package_name }}.config import load_config
    from {{ cookiecutter.package_name }}.sink.start_checks import check_marker_topic

    topic = f"markers-{uuid.uuid4().hex[:10]}"
    check_marker_topic(load_config(None, {"bootstrap_servers": kafka.bootstrap_servers, "marker_topic": topic},
                                   environ={}))
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    assert len(admin.list_topics(topic, timeout=30).topics[topic].partitions) == 1
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact" and configs["min.insync.replicas"].value == "1"


def test_a_checkpoint_older_than_the_published_batches_is_refused(kafka, new_topic, tmp_path):
    """Restored from an old copy, it would plan new ranges for batches 2 and 3, which the
    markers say are published: they would be skipped, losing their input."""
    from {{ cookiecutter.package_name }}.config import ConfigError, load_config
    from {{ cookiecutter.package_name }}.sink.start_checks import check_checkpoint_against_markers

    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "restored")
    shard = CommitShard(settings, 0)
    for batch_id in range(4):
        run_shard_transaction(settings, shard, chunks_of(batch_records(output, batch_id, 3), 0), batch_id)
    (tmp_path / "checkpoint" / "offsets").mkdir(parents=True)
    for batch_id in range(2):  # the copy knew batches 0 and 1
        (tmp_path / "checkpoint" / "offsets" / str(batch_id)).write_text("v1\n{}\n{\"events\": {\"0\": 5}}\n")
    config = load_config(None, {"bootstrap_servers": kafka.bootstrap_servers, "marker_topic": settings.marker_topic,
                                "sink_id": "restored", "checkpoint_location": settings.checkpoint}, environ={})
    with pytest.raises(ConfigError, match=r"'checkpoint_location'.*plans batches up to 1.*already published batch 3"):
        check_checkpoint_against_markers(config)


def test_a_marker_that_went_back_is_refused_naming_both_batches(kafka, new_topic, tmp_path):
    """A shard's markers only move forward: a lower batch after a higher one was written by another
    writer (here run_shard_transaction() called directly, as a tool might). The read says so, and the batch stops."""
    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "back")
    shard = CommitShard(settings, 0)
    run_shard_transaction(settings, shard, chunks_of(batch_records(output, 3, 2), 0), 3)
    run_shard_transaction(settings, shard, chunks_of(batch_records(output, 1, 2), 0), 1)
    (marker,) = read_marker_values(kafka.bootstrap_servers, settings.marker_topic, "back").values()
    assert (marker.batch_id, marker.went_back_to) == (3, 1)
    with pytest.raises(MarkersWentBack, match=r"shard 0's batch markers .* one said batch 3 was published, a later "
                                              r"one batch 1"):
        coordinator.commit_batch(settings, batch_records(output, 4, 2), 4, ProducerPool())
    assert batch_ids_visible(kafka, output) == [3, 3, 1, 1]


def test_two_sinks_whose_ids_share_a_prefix_share_one_marker_topic_exactly(kafka, new_topic, tmp_path):
    """Sinks `a` and `a-x` (one id the start of the other) on one marker topic, each with two shards:
    each reads only its own markers, so a re-run of each one's batch (as after a driver restart)
    publishes nothing again, and each batch is visible once per sink."""
    output = new_topic("out")
    base = f"a{uuid.uuid4().hex[:6]}"
    first = replace(settings_for(kafka, tmp_path / "a", new_topic, base), shards=2)
    second = replace(first, sink_id=f"{base}-x", checkpoint=str(tmp_path / "a-x" / "checkpoint"))

    def records(sink: str, batch_id: int) -> pa.Table:
        keys = [f"{sink}-k{i}" for i in range(6)]
        return pa.Table.from_pydict({
            "topic": [output] * 6, "key": [k.encode() for k in keys],
            "value": [json.dumps({"sink": sink}).encode() for _ in keys],
            "commit_shard": pa.array([i % 2 for i in range(6)], pa.int32()),
        })

    pools = {first.sink_id: ProducerPool(), second.sink_id: ProducerPool()}
    for batch_id in range(3):
        for settings in (first, second):
            coordinator.commit_batch(settings, records(settings.sink_id, batch_id), batch_id, pools[settings.sink_id])
    for settings in (first, second):  # a new driver of each: markers read again, the last batch re-run
        rerun = coordinator.commit_batch(settings, records(settings.sink_id, 2), 2, ProducerPool())
        assert rerun is not None and rerun.entry.status == COMMITTED
        assert read_markers(kafka.bootstrap_servers, first.marker_topic, settings.sink_id) == {0: 2, 1: 2}
    seen = [json.loads(value) for _key, value in read_topic(kafka.bootstrap_servers, output)]
    for sink in (first.sink_id, second.sink_id):
        assert sorted(v["batch_id"] for v in seen if v["sink"] == sink) == [0] * 6 + [1] * 6 + [2] * 6


def task_part(topic: str, batch_id: int, rows: int, shard: int = 0) -> tuple[list[pa.RecordBatch], ShardFigures]:
    """Shard `shard`'s part of batch N as a publishing task reads it (with each record's digest
    and shard, kafka_sink.for_commit's columns), in chunks, and the figures phase 1 gave it."""
    table = batch_records(topic, batch_id, rows).parts[0]
    hashes = pa.array([(i * 0x9E3779B97F4A7C15) % (1 << 63) for i in range(rows)], pa.int64())
    table = table.append_column(DIGEST, hashes).append_column(SHARD, pa.array([shard] * rows, pa.int32()))
    return table.to_batches(max_chunksize=50), ShardFigures(rows, digest(table))


def order_for(settings: SinkSettings, batch_id: int, figures: ShardFigures) -> TaskBrief:
    return TaskBrief(settings, batch_id, frozenset({0}), (figures,), "offsets", faults.DriverFaults(0, None))


def slowly(batches: list[pa.RecordBatch]):
    for batch in batches:
        time.sleep(0.05)  # long enough for the other attempt to start its producer meanwhile
        yield batch


def test_two_attempts_of_a_publishing_task_at_once_publish_its_shard_once(kafka, new_topic, tmp_path):
    """Spark runs a publishing task again once its attempt failed or its executor was lost; an
    executor that comes back may still be running the earlier attempt (speculative copies are
    off: spark/session.py). Both attempts of shard 0's task run here in two threads, on the same
    records: the later init_transactions fences the earlier attempt, or the later attempt finds the
    shard's marker at the batch. Either way its records are visible once, and the fenced attempt
    says so as a value: ProducerFenced, as the driver would have met it."""
    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "twice")
    batches, figures = task_part(output, 0, 400)
    results: list[ShardResult] = []
    attempts = [threading.Thread(target=lambda: results.append(publish_part(order_for(settings, 0, figures), 0,
                                                                            slowly(batches))))
                for _ in range(2)]
    for attempt in attempts:
        attempt.start()
        time.sleep(0.3)
    for attempt in attempts:
        attempt.join(120)
    published = [result for result in results if result.failure is None and result.published]
    assert len(results) == 2 and len(published) == 1 and published[0].published == {output: 400}, results
    other = next(result for result in results if result is not published[0])
    assert other.published == {} and (other.failure is None or isinstance(other.failure, ProducerFenced)), other
    assert batch_ids_visible(kafka, output) == [0] * 400
    assert read_markers(kafka.bootstrap_servers, settings.marker_topic, "twice") == {0: 0}


def test_a_publishing_task_refuses_a_marker_ahead_and_records_unlike_the_figures(kafka, new_topic, tmp_path):
    """A task whose shard's marker is past the batch publishes nothing and says so
    (CheckpointBehindOutput: the job stops naming checkpoint_location); a task whose records are
    not the ones the batch was prepared with (Spark computed a lost cached block again, and the
    query gave other records) aborts before its commit."""
    output = new_topic("out")
    settings = settings_for(kafka, tmp_path, new_topic, "checks")
    batches, figures = task_part(output, 0, 100)
    other = ShardFigures(figures.rows, (figures.digest + 1) % (1 << 64))
    refused = publish_part(order_for(settings, 0, other), 0, iter(batches))
    assert isinstance(refused.failure, RecomputedDifferently) and refused.published == {}, refused
    assert refused.failure.outcome is Outcome.RETRY and "the query gave other records" in str(refused.failure)
    assert batch_ids_visible(kafka, output) == []

    batches, figures = task_part(output, 3, 10)
    assert publish_part(order_for(settings, 3, figures), 0, iter(batches)).published == {output: 10}
    batches, figures = task_part(output, 2, 10)
    ahead = publish_part(order_for(settings, 2, figures), 0, iter(batches))
    assert isinstance(ahead.failure, CheckpointBehindOutput), ahead
    assert "already published batch 3 (shard 0's marker" in str(ahead.failure)
    assert batch_ids_visible(kafka, output) == [3] * 10
