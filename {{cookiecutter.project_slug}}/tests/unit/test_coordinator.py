"""Every branch of phase 2 (sink/coordinator.py) with a fake transactional producer: recovery
from the log and from the markers, shards already published, transient aborts retried in place,
fencing, errors that fail the batch, a refused record, a commit time-out retried, and the
producers forgotten after any failure. The same protocol on a real broker, with crashes, is in
tests/integration/."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, KafkaException

from {{ cookiecutter.package_name }}.failures import Outcome
from {{ cookiecutter.package_name }}.observability import metrics
from {{ cookiecutter.package_name }}.sink import coordinator
from {{ cookiecutter.package_name }}.sink.batch_records import RECORDS_SCHEMA, SHARD, InlineRecords
from {{ cookiecutter.package_name }}.sink.coordinator import commit_batch
from {{ cookiecutter.package_name }}.sink.invariants import (
    CheckpointBehindOutput,
    InvariantBroken,
    MarkersWentBack,
    RerunMismatch,
    SourceOffsetsWentBack,
)
from {{ cookiecutter.package_name }}.sink.marker import NO_BATCH
from {{ cookiecutter.package_name }}.sink.recovery import ShardState
from {{ cookiecutter.package_name }}.sink.settings import SinkSettings
from {{ cookiecutter.package_name }}.sink.shard_transaction import (
    ABORTED_TRANSACTION_RETRIES,
    CommitFailed,
    ProducerFenced,
    RecordRejected,
)
from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, PREPARED, LogEntry, SinkLog
from {{ cookiecutter.package_name }}.storage.checkpoint import SourceOffsets, offsets_digest

MARKERS = "markers"
NO_OFFSETS = SourceOffsets().digest()  # what a marker names of a checkpoint without offsets/N (these tests')


def kafka_error(code: int = KafkaError._STATE, *, fatal: bool = False, retriable: bool = False,
                abort: bool = False) -> KafkaException:
    return KafkaException(KafkaError(code, "injected", fatal=fatal, retriable=retriable, txn_requires_abort=abort))


@dataclass
class FakeProducer:
    """Records what the coordinator did; `fail` maps a method to the errors it raises, in turn."""

    fail: dict[str, list[Exception]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    produced: list[tuple[str, bytes | None, bytes | None]] = field(default_factory=list)
    committed: list[list[tuple[str, bytes | None, bytes | None]]] = field(default_factory=list)
    pending: list[tuple[str, bytes | None, bytes | None]] = field(default_factory=list)
    headers: dict[str, set[bytes]] = field(default_factory=dict)  # per topic, the batch_id headers produced

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.fail.get(name):
            raise self.fail[name].pop(0)

    def begin_transaction(self) -> None:
        self._call("begin")
        self.pending = []

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None, partition: int = -1,
                callback=None, on_delivery=None, timestamp: int = 0, headers=None) -> None:  # the client's, in order
        self._call("produce")
        self.pending.append((topic, key, value))
        self.headers.setdefault(topic, set()).update(v for k, v in headers or [] if k == "batch_id")

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float = 0) -> int:
        self._call("flush")
        return 0

    def commit_transaction(self, _timeout: float) -> None:
        self._call("commit")
        self.committed.append(self.pending)

    def abort_transaction(self, _timeout: float) -> None:
        self._call("abort")
        self.pending = []


class FakeShard:
    """A started shard: its producer, and its state (what its marker said, then what it committed)."""

    def __init__(self, settings: SinkSettings, shard: int, published: int = NO_BATCH, offsets: str = NO_OFFSETS,
                 **fail: list[Exception]):
        self.shard = shard
        self.transactional_id = settings.transactional_id(shard)
        self.producer = FakeProducer(fail=dict(fail))
        self.state = ShardState(shard, self.transactional_id, published, offsets)


@pytest.fixture
def settings(tmp_path: Path) -> SinkSettings:
    return SinkSettings(bootstrap_servers="unused:9092", checkpoint=str(tmp_path / "checkpoint"), sink_id="unit",
                        transactional_id_prefix="test", marker_topic=MARKERS, shards=1, commit_timeout_seconds=5,
                        client={})


@dataclass
class FakePool:
    """The shards commit_batch gets, in place of a ProducerPool of real producers."""

    shards: dict[int, FakeShard] = field(default_factory=dict)
    resets: int = 0

    def shards_for(self, settings: SinkSettings, _stopping: object = None) -> list[FakeShard]:
        return [self.shards[i] for i in range(settings.shards)]

    def states(self, settings: SinkSettings) -> list[ShardState]:
        return [self.shards[i].state for i in range(settings.shards)]

    def committed(self, _settings: SinkSettings, state: ShardState) -> None:
        self.shards[state.shard].state = state  # kept through reset(): what the marker now says

    def reset(self) -> None:
        self.resets += 1


@pytest.fixture
def pool() -> FakePool:
    return FakePool()


def batch(rows: int = 3, shards: int = 1, value: bytes = b'{"key":"k","count":1}') -> pa.Table:
    """A batch's records as the sink hands them over; with shards, record i in shard i % shards."""
    table = pa.table({"topic": ["out"] * rows, "key": [f"k{i}-{i % shards}".encode() for i in range(rows)],
                      "value": [value] * rows}, schema=RECORDS_SCHEMA)
    return table if shards == 1 else table.append_column(SHARD, pa.array([i % shards for i in range(rows)], pa.int32()))


def digests_of(table: pa.Table) -> list[str]:
    """The digests per shard a log entry keeps of these records (one shard)."""
    return [f"{d:016x}" for d in InlineRecords.of(table, 1).digests]


def records_of(transaction: list[tuple[str, bytes | None, bytes | None]]) -> list[str]:
    return [topic for topic, _key, _value in transaction]


def test_a_batch_is_one_transaction_with_its_marker_last_and_the_log_says_committed(settings, pool):
    pool.shards[0] = FakeShard(settings, 0)
    published = commit_batch(settings, batch(rows=6), 4, pool)
    assert published is not None and published.entry.status == COMMITTED
    assert published.records_per_topic == {"out": 6}
    assert pool.shards[0].producer.calls.count("begin") == 1 and pool.shards[0].producer.calls.count("commit") == 1
    (transaction,) = pool.shards[0].producer.committed
    assert records_of(transaction) == ["out"] * 6 + [MARKERS]
    assert pool.shards[0].state.batch_id == 4
    assert SinkLog(settings.checkpoint, settings.sink_id).read(4).status == COMMITTED


def test_each_record_goes_to_its_own_topic_whether_a_chunk_has_one_topic_or_several(settings, pool):
    """A chunk of one topic gives every record that topic without a string per record; a chunk of
    several (answers and dead letters) gives each record its own."""
    pool.shards[0] = FakeShard(settings, 0)
    mixed = pa.table({"topic": ["out", "dead", "out"], "key": [b"a", b"b", b"c"], "value": [b"{}"] * 3},
                     schema=RECORDS_SCHEMA)
    commit_batch(settings, mixed, 4, pool)
    commit_batch(settings, batch(rows=2), 5, pool)
    mixed_records, one_topic = (transaction[:-1] for transaction in pool.shards[0].producer.committed)
    assert [(topic, key) for topic, key, _ in mixed_records] == [("out", b"a"), ("dead", b"b"), ("out", b"c")]
    assert [(topic, key) for topic, key, _ in one_topic] == [("out", b"k0-0"), ("out", b"k1-0")]


def test_the_records_batch_id_header_continues_a_savepoints_numbering_and_the_marker_keeps_sparks(settings, pool):
    """After `run --from-savepoint`, the values carry first_batch_id + Spark's batch id: so do the
    records' headers. The marker's value and header stay in the checkpoint's own numbering."""
    settings = replace(settings, first_batch_id=100)
    pool.shards[0] = FakeShard(settings, 0)
    commit_batch(settings, batch(rows=3), 4, pool)
    assert pool.shards[0].producer.headers == {"out": {b"104"}, MARKERS: {b"4"}}


def test_an_empty_batch_publishes_nothing(settings, pool):
    pool.shards[0] = FakeShard(settings, 0)
    assert commit_batch(settings, batch(rows=0), 0, pool) is None
    assert pool.shards[0].producer.calls == []


def test_a_batch_the_log_says_committed_is_not_published_again(settings, pool):
    pool.shards[0] = FakeShard(settings, 0)
    done = LogEntry(batch_id=2, status=COMMITTED, transactional_ids=["x"], records_per_shard=[3],
                    digests_per_shard=digests_of(batch()), records=3)
    SinkLog(settings.checkpoint, settings.sink_id).write(done)
    again = commit_batch(settings, batch(), 2, pool)
    assert again is not None and again.entry.status == COMMITTED and again.records_per_topic == {}
    assert pool.shards[0].producer.calls == []


def test_a_batch_the_markers_say_published_only_marks_the_log(settings, pool):
    """The crash after the Kafka commit, before the log said committed: the marker decides."""
    pool.shards[0] = FakeShard(settings, 0, published=2)
    SinkLog(settings.checkpoint, settings.sink_id).write(
        LogEntry(batch_id=2, status=PREPARED, transactional_ids=["x"], records_per_shard=[3],
                 digests_per_shard=digests_of(batch()), records=3))
    assert commit_batch(settings, batch(), 2, pool).entry.status == COMMITTED
    assert pool.shards[0].producer.calls == []


def test_with_two_shards_only_the_one_behind_publishes_its_part(settings, pool):
    settings = replace(settings, shards=2)
    pool.shards[0], pool.shards[1] = FakeShard(settings, 0, published=7), FakeShard(settings, 1, published=6)
    entry = commit_batch(settings, batch(rows=8, shards=2), 7, pool).entry
    assert pool.shards[0].producer.calls == []
    (transaction,) = pool.shards[1].producer.committed
    keys = [key for _topic, key, _value in transaction[:-1]]
    assert keys == [b"k1-1", b"k3-1", b"k5-1", b"k7-1"]  # shard 1's records, and only those
    assert records_of(transaction)[-1] == MARKERS
    assert entry.records_per_shard == [4, 4]


def test_several_shards_need_the_shard_column(settings, pool):
    settings = replace(settings, shards=2)
    with pytest.raises(ValueError, match="2 commit shards, but the records carry no 'commit_shard' column"):
        commit_batch(settings, batch(), 0, pool)


def test_a_transient_abort_is_retried_in_place(settings, pool):
    pool.shards[0] = FakeShard(settings, 0, commit=[kafka_error(abort=True)])
    assert commit_batch(settings, batch(), 0, pool).entry.status == COMMITTED
    calls = pool.shards[0].producer.calls
    assert calls.count("abort") == 1 and calls.count("begin") == 2 and len(pool.shards[0].producer.committed) == 1
    assert pool.resets == 0


def test_aborts_past_the_retries_fail_the_batch_and_forget_the_producers(settings, pool):
    retries = ABORTED_TRANSACTION_RETRIES
    pool.shards[0] = FakeShard(settings, 0, commit=[kafka_error(abort=True) for _ in range(retries + 1)])
    with pytest.raises(CommitFailed, match=f"aborted {retries + 1} times"):
        commit_batch(settings, batch(), 0, pool)
    assert pool.shards[0].producer.committed == [] and pool.shards[0].state.batch_id == NO_BATCH
    assert pool.resets == 1
    assert SinkLog(settings.checkpoint, settings.sink_id).read(0).status == PREPARED


def test_a_fatal_error_means_fenced(settings, pool):
    pool.shards[0] = FakeShard(settings, 0, begin=[kafka_error(KafkaError._FENCED, fatal=True)])
    with pytest.raises(ProducerFenced, match="uses the same sink id; this one stops"):
        commit_batch(settings, batch(), 0, pool)
    assert pool.resets == 1


def test_an_error_that_needs_no_abort_fails_the_batch_for_spark_to_rerun(settings, pool):
    pool.shards[0] = FakeShard(settings, 0, commit=[kafka_error(retriable=False)])
    with pytest.raises(CommitFailed, match="batch 0, shard 0: injected"):
        commit_batch(settings, batch(), 0, pool)
    assert "abort" not in pool.shards[0].producer.calls


def test_a_commit_that_timed_out_is_retried(settings, pool):
    pool.shards[0] = FakeShard(settings, 0, commit=[kafka_error(KafkaError._TIMED_OUT, retriable=True)])
    assert commit_batch(settings, batch(), 0, pool).entry.status == COMMITTED
    assert pool.shards[0].producer.calls.count("commit") == 2 and "abort" not in pool.shards[0].producer.calls


def test_a_record_the_client_refuses_aborts_the_transaction_and_names_the_limit(settings, pool):
    pool.shards[0] = FakeShard(settings, 0, produce=[kafka_error(KafkaError.MSG_SIZE_TOO_LARGE)])
    with pytest.raises(RecordRejected, match=r"message\.max\.bytes"):
        commit_batch(settings, batch(), 0, pool)
    assert pool.shards[0].producer.calls[-1] == "abort" and pool.shards[0].producer.committed == []


def test_log_entries_older_than_the_kept_ones_are_deleted(settings, pool, monkeypatch):
    monkeypatch.setattr(coordinator, "LOG_ENTRIES_KEPT", 2)
    pool.shards[0] = FakeShard(settings, 0)
    for batch_id in range(4):
        commit_batch(settings, batch(), batch_id, pool)
    assert SinkLog(settings.checkpoint, settings.sink_id).batch_ids() == [2, 3]


def metric(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_the_metrics_count_what_was_committed_and_nothing_else(settings, pool):
    settings = replace(settings, sink_id="metrics-unit")
    before = time.time()
    pool.shards[0] = FakeShard(settings, 0, commit=[kafka_error(KafkaError._TIMED_OUT, retriable=True),
                                                    kafka_error(abort=True)])
    mixed = pa.table({"topic": ["out", "out", "dead"], "key": [b"a", b"b", b"c"], "value": [b"{}"] * 3},
                     schema=RECORDS_SCHEMA)
    commit_batch(settings, mixed, 5, pool)  # a time-out retried, then an abort tried again: 2 retries
    commit_batch(settings, batch(rows=2), 6, pool)
    commit_batch(settings, batch(rows=2), 6, pool)  # found committed: counts as nothing
    sink = {"sink_id": "metrics-unit"}
    assert metric("eos_sink_records_published_total", **sink, topic="out") == 4
    assert metric("eos_sink_records_published_total", **sink, topic="dead") == 1
    assert metric("eos_sink_batch_records", **sink, topic="out") == 2
    assert metric("eos_sink_batch_records", **sink, topic="dead") == 0  # none in the last batch
    assert metric("eos_sink_last_committed_batch", **sink, shard="0") == 6
    assert metric("eos_sink_commit_retries_total", **sink) == 2
    assert metric("eos_sink_phase2_seconds_count", **sink) == 2
    assert metric("eos_sink_commit_failures_total", **sink) == 0
    assert before <= metric("eos_sink_last_commit_timestamp_seconds", **sink) <= time.time()

    pool.shards[0] = FakeShard(settings, 0, begin=[kafka_error(KafkaError._FENCED, fatal=True)])
    with pytest.raises(ProducerFenced):
        commit_batch(settings, batch(), 7, pool)
    assert metric("eos_sink_commit_failures_total", **sink) == 1 and metric("eos_sink_fenced_total", **sink) == 1
    assert metric("eos_sink_records_published_total", **sink, topic="out") == 4


def test_a_marker_past_the_batch_fails_it_and_publishes_nothing(settings, pool):
    """Spark plans N+1 only after N's commit: a marker past N means the checkpoint is older than
    the output. Skipping N would leave its counts in the state and never in the output."""
    settings = replace(settings, shards=2)
    pool.shards[0], pool.shards[1] = FakeShard(settings, 0, published=4), FakeShard(settings, 1, published=9)
    with pytest.raises(CheckpointBehindOutput, match=r"batch 4 is planned by .* already published batch 9 \(shard 1"):
        commit_batch(settings, batch(rows=4, shards=2), 4, pool)
    assert pool.shards[0].producer.calls == [] and pool.shards[1].producer.calls == []
    assert SinkLog(settings.checkpoint, settings.sink_id).read(4) is None


def test_markers_that_went_back_fail_the_batch_for_good_saying_what_was_read_and_what_to_do(settings, pool):
    """A shard's marker named batch 9, a later one batch 6: another writer wrote them."""
    settings = replace(settings, shards=2)
    pool.shards[0], pool.shards[1] = FakeShard(settings, 0, published=6), FakeShard(settings, 1, published=9)
    pool.shards[1].state = replace(pool.shards[1].state, went_back_to=6)
    with pytest.raises(MarkersWentBack, match=r"shard 1's batch markers in 'markers' went back: one said batch 9 was "
                                              r"published, a later one batch 6\. .*Nothing was published\. Stop any "
                                              r"other job with sink_id 'unit'"):
        commit_batch(settings, batch(rows=4, shards=2), 7, pool)
    assert pool.shards[0].producer.calls == [] and pool.shards[1].producer.calls == []
    assert SinkLog(settings.checkpoint, settings.sink_id).read(7) is None
    assert issubclass(MarkersWentBack, InvariantBroken)


def test_a_marker_at_the_batch_from_other_source_offsets_is_a_checkpoint_behind_the_output(settings, pool, tmp_path):
    """One batch behind: the marker has N, but N was published from other offsets than this
    checkpoint's offsets/N. The same offsets: a re-run after a crash, nothing to publish."""
    offsets = tmp_path / "checkpoint" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "3").write_text('v1\n{}\n{"events":{"0":10}}\n')
    pool.shards[0] = FakeShard(settings, 0, published=3, offsets="0123456789abcdef")
    with pytest.raises(CheckpointBehindOutput, match="already published batch 3 from other source offsets"):
        commit_batch(settings, batch(), 3, pool)
    pool.shards[0] = FakeShard(settings, 0, published=3, offsets=offsets_digest({"sources": [{"events": {"0": 10}}]}))
    assert commit_batch(settings, batch(), 3, pool).entry.status == COMMITTED
    assert pool.shards[0].producer.calls == []


def test_a_published_batch_carries_its_source_offsets_in_its_marker(settings, pool, tmp_path):
    offsets = tmp_path / "checkpoint" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{}\n{"events":{"0":7}}\n')
    pool.shards[0] = FakeShard(settings, 0)
    commit_batch(settings, batch(), 0, pool)
    (transaction,) = pool.shards[0].producer.committed
    marker = json.loads(transaction[-1][2])
    assert marker["format"] == 1 and marker["batch_id"] == 0
    assert marker["source_offsets"] == offsets_digest({"sources": [{"events": {"0": 7}}]})
    assert pool.shards[0].state.source_offsets == marker["source_offsets"]


def crash_between_the_shards_commits(settings, pool) -> None:
    """Batch 5 with two shards: shard 0 committed, shard 1's commit failed (the re-run follows)."""
    pool.shards[0], pool.shards[1] = FakeShard(settings, 0), FakeShard(settings, 1, commit=[kafka_error()])
    with pytest.raises(CommitFailed):
        commit_batch(settings, batch(rows=4, shards=2), 5, pool)
    assert pool.shards[0].state.batch_id == 5


def test_a_rerun_with_other_records_stops_the_job_before_its_shards_mix_two_computations(settings, pool):
    """A query that is not deterministic: the re-run after a crash between the two shards'
    commits computes other records for shard 1, while shard 0 holds the first attempt's. By
    default (on_rerun_mismatch = "fail") the job stops naming the option, and shard 1 publishes
    nothing of this computation."""
    settings = replace(settings, shards=2, sink_id="rerun-fail")
    crash_between_the_shards_commits(settings, pool)
    before = metric("eos_sink_rerun_mismatch_total", sink_id="rerun-fail")
    shard_1_transactions = len(pool.shards[1].producer.committed)
    with pytest.raises(RerunMismatch, match=r"batch 5 .* shards \[0, 1\].* Shards \[0\] published") as raised:
        commit_batch(settings, batch(rows=4, shards=2, value=b'{"key":"k","count":2}'), 5, pool)
    assert (raised.value.outcome, raised.value.option) == (Outcome.FIX_SETTING, "on_rerun_mismatch")
    assert "on_rerun_mismatch" in str(raised.value)
    assert len(pool.shards[1].producer.committed) == shard_1_transactions  # nothing more published
    assert metric("eos_sink_rerun_mismatch_total", sink_id="rerun-fail") == before + 1


def test_with_warn_a_rerun_with_other_records_publishes_and_is_reported(settings, pool, caplog):
    settings = replace(settings, shards=2, sink_id="rerun-warn", on_rerun_mismatch="warn")
    crash_between_the_shards_commits(settings, pool)
    before = metric("eos_sink_rerun_mismatch_total", sink_id="rerun-warn")
    entry = commit_batch(settings, batch(rows=4, shards=2, value=b'{"key":"k","count":2}'), 5, pool).entry
    assert entry.status == COMMITTED
    assert metric("eos_sink_rerun_mismatch_total", sink_id="rerun-warn") == before + 1
    (line,) = [r.getMessage() for r in caplog.records if "not deterministic" in r.getMessage()]
    assert "batch 5" in line and "shards [0, 1]" in line and "two computations" in line
    caplog.clear()
    commit_batch(settings, batch(rows=4, shards=2, value=b'{"key":"k","count":2}'), 5, pool)  # the same again: silent
    assert not [r for r in caplog.records if "not deterministic" in r.getMessage()]


def test_a_rerun_with_the_same_records_in_another_order_is_not_reported(settings, pool, caplog):
    pool.shards[0] = FakeShard(settings, 0, commit=[kafka_error()])
    table = batch(rows=5)
    with pytest.raises(CommitFailed):
        commit_batch(settings, table, 2, pool)
    assert commit_batch(settings, table.take([4, 3, 2, 1, 0]), 2, pool).entry.status == COMMITTED
    assert not [r for r in caplog.records if "not deterministic" in r.getMessage()]


def test_source_offsets_that_go_back_fail_the_batch_naming_the_partition(settings, pool, tmp_path):
    offsets = tmp_path / "checkpoint" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text('v1\n{}\n{"events":{"0":10,"1":5}}\n')
    (offsets / "2").write_text('v1\n{}\n{"events":{"0":12,"1":5,"2":3}}\n')  # a partition added: fine
    (offsets / "3").write_text('v1\n{}\n{"events":{"0":4,"2":3}}\n')
    pool.shards[0] = FakeShard(settings, 0)
    commit_batch(settings, batch(), 0, pool)
    commit_batch(settings, batch(), 2, pool)  # batch 1 was empty: compared with batch 0
    with pytest.raises(SourceOffsetsWentBack, match=r"events/0 went back from 12 to 4; events/1 \(at 5\) is gone"):
        commit_batch(settings, batch(), 3, pool)
    assert SinkLog(settings.checkpoint, settings.sink_id).read(3) is None
    assert len(pool.shards[0].producer.committed) == 2
