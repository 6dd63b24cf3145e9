"""The sink's pieces that need no Kafka: staging, the sink log, the verifier."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from {{ cookiecutter.package_name }} import storage
from {{ cookiecutter.package_name }}.devtools.readback import Published
from {{ cookiecutter.package_name }}.devtools.verify import Verdict, verify, verify_batches
from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, PREPARED, LogEntry, SinkLog
from {{ cookiecutter.package_name }}.sink.stage import StagedFileCorrupt, read_staged, stage


def staged_rows() -> pa.Table:
    return pa.Table.from_pydict({"topic": ["counts", "dead"], "key": [b"red", b"events/1/9"],
                                 "value": [b'{"key":"red","count":3,"batch_id":7}', b'{"reason":"x"}']})


def test_staged_files_round_trip_and_detect_corruption(tmp_path):
    checkpoint = str(tmp_path)
    rows = staged_rows()
    staged = stage(checkpoint, "sink", 7, 1, 0, rows)
    assert staged.path == "sinks/sink/staging/7/1-0.arrow" and staged.rows == 2
    assert read_staged(checkpoint, staged).equals(rows)
    (tmp_path / staged.path).write_bytes(b"tampered")
    with pytest.raises(StagedFileCorrupt, match="checksum"):
        read_staged(checkpoint, staged)


def test_a_committed_log_entry_is_never_replaced(tmp_path):
    log = SinkLog(str(tmp_path), "sink")
    entry = LogEntry(batch_id=3, status=PREPARED, transactional_ids=["t-0"], staged=[], records=0)
    log.write(entry)
    entry.status = COMMITTED
    log.write(entry)
    assert log.read(3) == entry and log.batch_ids() == [3]
    with pytest.raises(RuntimeError, match="already committed"):
        log.write(LogEntry(batch_id=3, status=PREPARED, transactional_ids=["t-1"], staged=[]))


def test_the_verifier_sees_loss_duplicates_and_bad_dead_letters():
    published = Published()
    published.counts["red"] += [(0, 2), (1, 5), (1, 5)]
    published.counts["blue"] += [(0, 1)]
    verdict = verify(published, {"red": 5, "blue": 4}, [b"x"])
    assert verdict.duplicated == 1 and verdict.not_increasing == 1 and verdict.lost == 3
    assert not verdict.dead_letter_ok and not verdict.exactly_once


def test_staged_files_and_log_entries_reach_the_disk_before_they_count(tmp_path, monkeypatch):
    """fsync of the file and of its directory, so a power loss cannot take back what was reported."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(storage.os, "fsync", fsync)
    staged = stage(str(tmp_path), "sink", 7, 1, 0, staged_rows())
    SinkLog(str(tmp_path), "sink").write(LogEntry(batch_id=7, status=PREPARED, transactional_ids=[], staged=[staged]))
    staging, log = tmp_path / "sinks/sink/staging/7", tmp_path / "sinks/sink/log"
    assert [p for p in synced if p.startswith(str(staging))][-1] == str(staging)  # its directory, after the file
    assert any(p.startswith(str(staging / "1-0.arrow.tmp-")) for p in synced)
    assert str(log) in synced and any(p.startswith(str(log / "7.json.tmp-")) for p in synced)


@pytest.mark.parametrize("content", [b"", b'{"batch_id": 3, "sta', b"\x00" * 64])
def test_an_unreadable_log_entry_leaves_the_decision_to_the_markers(tmp_path, content):
    """An entry left empty or cut short by a power loss is not fatal: it reads as absent."""
    log = SinkLog(str(tmp_path), "sink")
    log.write(LogEntry(batch_id=3, status=PREPARED, transactional_ids=["t-0"], staged=[]))
    (tmp_path / "sinks/sink/log/3.json").write_bytes(content)
    assert log.read(3) is None
    entry = LogEntry(batch_id=3, status=COMMITTED, transactional_ids=["t-0"], staged=[])
    log.write(entry)
    assert log.read(3) == entry


def batches_of_red(*published: tuple[int, int]) -> Verdict:
    """Input: 6 counted "red" events on partition 0 (offsets 0-5) and one malformed record (offset 6);
    batches 0, 1, 2 end at offsets 2, 4, 7."""
    records = [(0, offset, b"red") for offset in range(6)] + [(0, 6, b"oops")]
    output = Published()
    output.counts["red"] += list(published)
    counted = {b"red": "red"}.get
    verdict = verify(output, {"red": 6}, [])
    return verify_batches(verdict, output, records, counted, {0: {0: 2}, 1: {0: 4}, 2: {0: 7}})


def test_every_intermediate_count_is_checked_batch_by_batch():
    assert batches_of_red((0, 2), (1, 4), (2, 6)).exactly_once


def test_a_skipped_batch_is_caught_although_the_final_count_is_right():
    verdict = batches_of_red((0, 2), (2, 6))  # batch 1 lost; batch 2 brings the final count right
    assert verify(Published(counts={"red": [(0, 2), (2, 6)]}), {"red": 6}, []).exactly_once, "the old check passes"
    assert verdict.missing_updates == 1 and not verdict.exactly_once
    assert "no record of batch 1" in verdict.problems[0]


def test_a_count_published_from_the_wrong_ranges_is_caught():
    verdict = batches_of_red((0, 2), (1, 5), (2, 6))
    assert verdict.wrong_counts == 1 and "batch 1: published [5], the input up to that batch says 4" in \
        verdict.problems[0]


def test_a_task_stages_its_batches_as_they_come(tmp_path):
    """The sink task passes Spark's batches straight through: nothing holds its whole output."""
    rows = staged_rows()
    empty = pa.RecordBatch.from_pylist([], schema=rows.schema)
    taken: list[int] = []

    def batches():
        for batch in [*rows.to_batches(max_chunksize=1), empty]:
            taken.append(batch.num_rows)
            yield batch

    staged = stage(str(tmp_path), "sink", 8, 0, 1, batches())
    assert staged.rows == 2 and taken == [1, 1, 0]
    assert read_staged(str(tmp_path), staged).equals(rows)
    assert stage(str(tmp_path), "sink", 8, 1, 0, iter([])) is None
