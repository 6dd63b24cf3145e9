"""The sink's pieces that need no Kafka: staging, the sink log, the verifier."""

from __future__ import annotations

import pyarrow as pa
import pytest

from {{ cookiecutter.package_name }}.readback import Published
from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, PREPARED, LogEntry, SinkLog
from {{ cookiecutter.package_name }}.sink.stage import StagedFileCorrupt, read_staged, stage
from {{ cookiecutter.package_name }}.verify import verify


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
