"""The sink's pieces that need no Kafka: records, staging, the sink log, the verifier."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from {{ cookiecutter.package_name }}.readback import Published
from {{ cookiecutter.package_name }}.sink.records import output_records
from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, PREPARED, LogEntry, SinkLog
from {{ cookiecutter.package_name }}.sink.stage import StagedFileCorrupt, read_staged, stage
from {{ cookiecutter.package_name }}.verify import verify


def sink_rows() -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "kind": ["count", "dead_letter"], "key": ["red", "events/1/9"], "count": [3, None],
        "dead_letter_value": [None, '{"reason":"not JSON","source_offset":9,"value_base64":"b29wcw=="}'],
    })


def test_output_records_are_final_kafka_bytes():
    table = output_records(sink_rows(), 7, "counts", "dead").to_pydict()
    assert table["topic"] == ["counts", "dead"]
    assert table["key"] == [b"red", b"events/1/9"]
    assert json.loads(table["value"][0]) == {"key": "red", "count": 3, "batch_id": 7}
    dead = json.loads(table["value"][1])
    assert (dead["reason"], dead["source_offset"], dead["value_base64"]) == ("not JSON", 9, "b29wcw==")
    assert dead["batch_id"] == 7


def test_staged_files_round_trip_and_detect_corruption(tmp_path):
    checkpoint = str(tmp_path)
    rows = output_records(sink_rows(), 7, "counts", "dead")
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
