"""The sink's pieces that need no Kafka: the sink log, the verifier."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, PREPARED, LogEntry, SinkLog
from {{ cookiecutter.package_name }}.storage import files as storage
from {{ cookiecutter.package_name }}_tools.readback import Published
from {{ cookiecutter.package_name }}_tools.verify import Expected, Verdict, verify, verify_batches


def test_a_committed_log_entry_is_never_replaced(tmp_path):
    log = SinkLog(str(tmp_path), "sink")
    entry = LogEntry(batch_id=3, status=PREPARED, transactional_ids=["t-0"], records=0)
    log.write(entry)
    entry = entry.committed(time.time())
    log.write(entry)
    assert log.read(3) == entry and log.batch_ids() == [3]
    with pytest.raises(RuntimeError, match="already committed"):
        log.write(LogEntry(batch_id=3, status=PREPARED, transactional_ids=["t-1"]))


def counted(n: int, key: str = "red") -> dict[str, object]:
    return {"key": key, "count": n}


def test_the_verifier_sees_loss_duplicates_and_bad_dead_letters():
    published = Published()
    published.answers["red"] += [(0, counted(2)), (1, counted(5)), (1, counted(5))]
    published.answers["blue"] += [(0, counted(1, "blue"))]
    published.answers["grey"] += [(0, counted(1, "grey"))]
    verdict = verify(published, Expected("upsert", {"red": counted(5), "blue": counted(4, "blue")}), [b"x"])
    assert verdict.duplicated == 2 and verdict.lost == 1  # red's batch 1 twice, grey unexpected; blue short
    assert not verdict.dead_letter_ok and not verdict.exactly_once


def test_log_entries_reach_the_disk_before_they_count(tmp_path, monkeypatch):
    """fsync of the file and of its directory, so a power loss cannot take back what was reported."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(storage.os, "fsync", fsync)
    SinkLog(str(tmp_path), "sink").write(LogEntry(batch_id=7, status=PREPARED, transactional_ids=[]))
    log = tmp_path / "sinks/sink/log"
    assert any(p.startswith(str(log / "7.json.tmp-")) for p in synced)
    assert synced[-1] == str(log)  # its directory, after the file


@pytest.mark.parametrize("content", [b"", b'{"batch_id": 3, "sta', b"\x00" * 64])
def test_an_unreadable_log_entry_leaves_the_decision_to_the_markers(tmp_path, content):
    """An entry left empty or cut short by a power loss is not fatal: it reads as absent."""
    log = SinkLog(str(tmp_path), "sink")
    log.write(LogEntry(batch_id=3, status=PREPARED, transactional_ids=["t-0"]))
    (tmp_path / "sinks/sink/log/3.json").write_bytes(content)
    assert log.read(3) is None
    entry = LogEntry(batch_id=3, status=COMMITTED, transactional_ids=["t-0"])
    log.write(entry)
    assert log.read(3) == entry


def count_model(events):
    """A count per key `k`: the verdict's test query, whatever pipeline/query.py computes."""
    counts: Counter[str] = Counter()
    for event in events:
        counts[event["k"]] += 1
        yield event["k"], {"key": event["k"], "count": counts[event["k"]]}


def batches_of_red(*published: tuple[int, int], ends: dict[int, dict[int, int]] | None = None) -> Verdict:
    """Input: 6 kept "red" events on partition 0 (offsets 0-5) and one malformed record (offset 6);
    batches 0, 1, 2 end at offsets 2, 4, 7 (or `ends`); the query's model is the count's."""
    records = [(0, offset, b"red") for offset in range(6)] + [(0, 6, b"oops")]
    output = Published()
    output.answers["red"] += [(batch, counted(n)) for batch, n in published]
    kept = {b"red": {"k": "red"}}.get
    verdict = verify(output, Expected("upsert", {"red": counted(6)}), [])
    return verify_batches(verdict, output, records, kept, ends or {0: {0: 2}, 1: {0: 4}, 2: {0: 7}}, count_model)


def test_every_intermediate_count_is_checked_batch_by_batch():
    assert batches_of_red((0, 2), (1, 4), (2, 6)).exactly_once


def test_a_skipped_batch_is_caught_although_the_final_count_is_right():
    verdict = batches_of_red((0, 2), (2, 6))  # batch 1 lost; batch 2 brings the final count right
    last_answers = Expected("upsert", {"red": counted(6)})
    assert verify(Published(answers={"red": [(0, counted(2)), (2, counted(6))]}), last_answers, []
                  ).exactly_once, "the last answers alone pass"
    assert verdict.missing_updates == 1 and not verdict.exactly_once
    assert "no record of batch 1" in verdict.problems[0]


def test_batches_whose_start_spark_no_longer_keeps_are_judged_from_the_first_batch_it_keeps():
    """Spark keeps the offsets of its last batches only: here batch 0's are gone, so batch 1 holds
    all the input below its end. Its answer is judged, not which keys it changed; the next batch
    is judged in full."""
    def judged(*published: tuple[int, int]) -> Verdict:
        return batches_of_red(*published, ends={1: {0: 4}, 2: {0: 7}})

    assert judged((0, 2), (1, 4), (2, 6)).exactly_once
    assert judged((0, 4), (2, 6)).exactly_once, "batch 1 may have changed nothing: its start is unknown"
    assert judged((1, 5), (2, 6)).wrong_answers == 1
    assert judged((0, 2), (1, 4)).missing_updates == 1


def test_a_count_published_from_the_wrong_ranges_is_caught():
    verdict = batches_of_red((0, 2), (1, 5), (2, 6))
    assert verdict.wrong_answers == 1 and "batch 1: published [{'key': 'red', 'count': 5}], the input up to " \
        "that batch says {'key': 'red', 'count': 4}" in verdict.problems[0]


def test_a_records_commit_shard_and_the_shards_digest_depend_on_the_records_only(spark):
    """A re-run of a batch must put every record in the shard it had (the shard is a hash of
    topic and key), and give each shard the digest it had, whatever the partitioning and order
    the re-run computes the records in; one record changed changes its shard's digest."""
    from {{ cookiecutter.package_name }}.sink.batch_records import DIGEST, SHARD, InlineRecords, digest
    from {{ cookiecutter.package_name }}.sink.kafka_sink import for_commit

    rows = [("counts", f"k{i}".encode(), b"{}") for i in range(200)]
    schema = "topic STRING, key BINARY, value BINARY"
    first = for_commit(spark.createDataFrame(rows, schema).repartition(3), 2).toArrow()
    rerun = for_commit(spark.createDataFrame(rows[::-1], schema).repartition(5), 2).toArrow()
    shard_of = [dict(zip(t.column("key").to_pylist(), t.column(SHARD).to_pylist(), strict=True))
                for t in (first, rerun)]
    assert shard_of[0] == shard_of[1] and set(shard_of[0].values()) == {0, 1}
    first_records, rerun_records = InlineRecords.of(first, 2), InlineRecords.of(rerun, 2)
    assert first_records.rows_per_shard == [list(shard_of[0].values()).count(s) for s in (0, 1)]
    assert first_records.digests == rerun_records.digests and len(set(first_records.digests)) == 2
    assert first_records.parts[0].column_names == ["topic", "key", "value"]
    assert for_commit(spark.createDataFrame(rows, schema), 1).columns == ["topic", "key", "value", DIGEST, SHARD]

    changed = [*rows[:-1], ("counts", rows[-1][1], b'{"count": 2}')]
    other = InlineRecords.of(for_commit(spark.createDataFrame(changed, schema), 2).toArrow(), 2)
    shard = shard_of[0][rows[-1][1]]
    assert other.digests[shard] != first_records.digests[shard]
    assert other.digests[1 - shard] == first_records.digests[1 - shard]
    # Records built on the driver (no executor hash) get a digest of their own, order-independent too.
    table = first.select(["topic", "key", "value"])
    assert digest(table) == digest(table.take(list(range(table.num_rows))[::-1])) != digest(table.slice(1))


def test_records_with_headers_keep_them_in_the_shards_digest_and_before_the_batch_id(spark):
    """A query that keeps its input's headers (query.KEEPS_HEADERS): a record's headers are part of
    its digest (a re-run that lost them is told apart) and reach the producer in order, before the
    sink's batch id; a record without any takes the batch id alone."""
    from {{ cookiecutter.package_name }}.sink.batch_records import HEADERS, InlineRecords, record_headers
    from {{ cookiecutter.package_name }}.sink.kafka_sink import for_commit

    schema = "topic STRING, key BINARY, value BINARY, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
    kept = [("out", b"a", b"{}", [("trace", b"1"), ("trace", None)]), ("out", b"b", b"{}", None)]
    lost = [(*record[:3], None) for record in kept]
    records = [InlineRecords.of(for_commit(spark.createDataFrame(rows, schema), 1).toArrow(), 1)
               for rows in (kept, lost)]
    assert records[0].digests != records[1].digests
    assert records[0].parts[0].column_names == ["topic", "key", "value", HEADERS]
    batch_id = [("batch_id", b"7")]
    chunk = next(records[0].chunks(0))
    by_key = dict(zip(chunk.column("key").to_pylist(), record_headers(chunk, batch_id) or [], strict=True))
    assert by_key == {b"a": [("trace", b"1"), ("trace", None), *batch_id], b"b": batch_id}
    assert record_headers(next(records[1].chunks(0)), batch_id) is None  # no record has any: no conversion


def test_the_batch_id_is_stamped_last_on_each_value_and_a_null_value_stays_null():
    import pyarrow as pa

    from {{ cookiecutter.package_name }}.sink.batch_records import with_batch_id

    values = pa.chunked_array([[b'{"key":"red","count":2}', None], [b'{"reason":"not JSON"}']], pa.binary())
    assert with_batch_id(values, 41).to_pylist() == [b'{"key":"red","count":2,"batch_id":41}', None,
                                                     b'{"reason":"not JSON","batch_id":41}']


def test_the_executors_figures_of_a_batch_are_the_drivers_and_partition_s_holds_shard_s(spark):
    """Spark tasks publish a batch with the figures the executors computed (distributed_records),
    which must equal those the driver computes from the same records (InlineRecords), digests
    included (summed in two halves there, modulo 2**64 here); read-back requests are kept apart; and
    partition s of the batch by shard holds shard s's records, so task s publishes shard s."""
    from {{ cookiecutter.package_name }}.sink.batch_records import SHARD, InlineRecords
    from {{ cookiecutter.package_name }}.sink.distributed_records import distribute
    from {{ cookiecutter.package_name }}.sink.kafka_sink import for_commit

    rows = [("counts", f"k{i}".encode(), f"v{i}".encode()) for i in range(2_000)]
    rows += [(None, f"read-back-{i}".encode(), None) for i in range(3)]
    records = for_commit(spark.createDataFrame(rows, "topic STRING, key BINARY, value BINARY").repartition(4), 5)
    inline = InlineRecords.of(records.toArrow(), 5)
    distributed = distribute(records, 5)
    try:
        assert distributed.rows_per_shard == inline.rows_per_shard and sum(inline.rows_per_shard) == 2_000
        assert distributed.digests == inline.digests
        wanted = [b"read-back-0", b"read-back-1", b"read-back-2"]
        assert sorted(distributed.read_back_keys) == sorted(inline.read_back_keys) == wanted
        assert distributed.size_bytes == sum(len(t) + len(k) + len(v) for t, k, v in rows if t)
        held = distributed.by_shard().rdd.mapPartitionsWithIndex(
            lambda index, part: [(index, sorted({row[SHARD] for row in part}))]).collect()
        assert held == [(shard, [shard]) for shard in range(5)]
    finally:
        distributed.release()


def test_auto_publishes_a_batch_expected_small_from_the_driver_and_any_other_from_tasks():
    """publish_from = "auto": a batch's records are predicted from its input (offsets/N against
    the previous batch's) times the previous batch's records per input record (one, for a run's
    first batch), and at least the previous batch's records; predicted within DRIVER_MAX_ROWS and
    DRIVER_MAX_BYTES, the driver publishes it; a batch computed on the executors whose figures
    are within them too (`small`). "tasks" and "driver" do not look at the batches."""
    import pyarrow as pa

    from {{ cookiecutter.package_name }}.sink.batch_records import InlineRecords
    from {{ cookiecutter.package_name }}.sink.placement import Placement
    from {{ cookiecutter.package_name }}.storage.checkpoint import SourceOffsets

    def batch(rows: int, value_bytes: int = 10) -> InlineRecords:
        return InlineRecords.of(pa.table({"topic": ["t"] * rows, "key": [b"k"] * rows,
                                          "value": [b"v" * value_bytes] * rows}), 1)

    def at(*offsets: int) -> SourceOffsets:  # the end offsets of a batch over len(offsets) partitions
        return SourceOffsets(({"events": {str(p): offset for p, offset in enumerate(offsets)}},))

    limit = Placement.DRIVER_MAX_ROWS
    auto = Placement("auto")
    assert not auto.on_driver(at(100, 100))  # where the batch before began is not known
    auto.previous_offsets = at(0, 0)  # where the batch before this run's first ended (offsets/N-1)
    assert not auto.on_driver(at(limit, 1))  # the first batch of a run: one record per input, too many
    assert auto.on_driver(at(100, 100))
    auto.observed(at(100, 100), batch(8))
    assert auto.on_driver(at(200, 200))  # 200 inputs, 8 records per 200 inputs
    auto.observed(at(200, 200), batch(200))  # 200 inputs gave 200 records
    assert auto.on_driver(at(300, 300))  # 200 inputs now: about 200 records
    assert not auto.on_driver(at(200 + limit, 200 + limit))  # a backlog arrives: 2 × limit inputs
    auto.observed(at(50_200, 50_200), batch(8))  # few keys: 100,000 inputs gave 8 records
    assert auto.on_driver(at(150_200, 150_200))
    auto.observed(at(150_200, 150_200), batch(limit + 1))  # the previous batch alone was too large
    assert not auto.on_driver(at(150_201, 150_201))
    auto.observed(at(150_300, 150_300), batch(10, value_bytes=Placement.DRIVER_MAX_BYTES))
    assert not auto.on_driver(at(150_301, 150_301))
    assert not auto.on_driver(at(150_400, 150_400, 0))  # a partition new since the previous batch
    auto.observed(at(150_400, 150_400, 0), batch(1))
    assert auto.on_driver(at(150_500, 150_500, 0))  # its input is known again: one record per input
    assert auto.small(limit, Placement.DRIVER_MAX_BYTES)
    assert not auto.small(limit + 1, 1) and not auto.small(1, Placement.DRIVER_MAX_BYTES + 1)
    for fixed, on_driver in (("tasks", False), ("driver", True)):
        placement = Placement(fixed)
        assert not placement.small(1, 1)
        assert placement.on_driver(at(0)) is on_driver
        placement.observed(at(0), batch(10))
        assert placement.on_driver(at(1)) is on_driver


def copied_model(events):
    """An append output's model: each kept event published as one record."""
    for event in events:
        yield event["k"], {"key": event["k"], "n": event["n"]}


def records_of(*published: tuple[int, int]) -> Published:
    output = Published()
    for batch, n in published:
        output.answers["red"].append((batch, {"key": "red", "n": n}))
    return output


def append_verdict(output: Published, ends: dict[int, dict[int, int]] | None = None) -> Verdict:
    """Input: kept events n=0..3 of key "red" on partition 0; batches 0 and 1 end at offsets 2 and 4
    (or `ends`)."""
    events = [{"k": "red", "n": n} for n in range(4)]
    records = [(0, n, str(n).encode()) for n in range(4)]
    kept = {str(n).encode(): event for n, event in enumerate(events)}.get
    verdict = verify(output, Expected.of(copied_model, events, "append"), [])
    return verify_batches(verdict, output, records, kept, ends or {0: {0: 2}, 1: {0: 4}}, copied_model, "append")


def test_an_append_output_is_every_record_once_in_the_batch_its_input_is_in():
    assert append_verdict(records_of((0, 0), (0, 1), (1, 2), (1, 3))).exactly_once
    duplicated = append_verdict(records_of((0, 0), (0, 1), (1, 2), (1, 3), (1, 3)))
    assert (duplicated.duplicated, duplicated.lost, duplicated.wrong_answers) == (1, 0, 1)
    lost = append_verdict(records_of((0, 0), (1, 2), (1, 3)))
    assert (lost.duplicated, lost.lost, lost.missing_updates) == (0, 1, 1)
    misplaced = append_verdict(records_of((0, 0), (0, 1), (0, 2), (1, 3)))  # n=2 published in batch 0, not 1
    assert (misplaced.lost, misplaced.duplicated) == (0, 0)
    assert (misplaced.wrong_answers, misplaced.missing_updates) == (1, 1) and not misplaced.exactly_once
    assert "batch 0: 1 records its input does not give" in misplaced.problems[0]


def test_append_records_of_batches_whose_start_spark_no_longer_keeps_are_judged_together():
    """Batch 0's offsets gone: batch 1's records and those before it are judged as one."""
    def judged(output: Published) -> Verdict:
        return append_verdict(output, ends={1: {0: 4}})

    assert judged(records_of((0, 0), (0, 1), (1, 2), (1, 3))).exactly_once
    assert judged(records_of((0, 0), (1, 2), (1, 3))).missing_updates == 1
    assert judged(records_of((0, 0), (0, 1), (0, 1), (1, 2), (1, 3))).wrong_answers == 1


def test_the_publishing_workers_are_warmed_once_per_idle_minute(monkeypatch):
    """A batch for the tasks starts the warm-up job only when no publishing job ran for
    IDLE_SECONDS (Spark reaps an idle Python worker after a minute), one task per shard."""
    from {{ cookiecutter.package_name }}.sink import publishing_tasks

    started: list[int] = []
    now = [1000.0]

    class Thread:
        def __init__(self, target, args, name, daemon):
            self.args = args

        def start(self):
            started.append(self.args[1])

    monkeypatch.setattr(publishing_tasks.threading, "Thread", Thread)
    monkeypatch.setattr(publishing_tasks.time, "monotonic", lambda: now[0])
    workers = publishing_tasks.WorkerWarmUp()
    workers.before_phase_1(object(), 3)  # type: ignore[arg-type]
    assert started == [3]
    now[0] += 30
    workers.used()
    now[0] += publishing_tasks.WorkerWarmUp.IDLE_SECONDS - 1
    workers.before_phase_1(object(), 3)  # type: ignore[arg-type]
    assert started == [3]  # the last publishing job's workers are still there
    now[0] += 2
    workers.before_phase_1(object(), 2)  # type: ignore[arg-type]
    assert started == [3, 2]
