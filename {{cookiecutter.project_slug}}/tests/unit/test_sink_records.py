"""What the sink persists and reads back: versioned layouts refused when unknown, the log
entry's one transition, marker keys of other sinks on a shared topic; and the two guards around
the driver: a heartbeat that cannot die silently, a restart that waits out a Kafka outage."""

from __future__ import annotations

import dataclasses
import json
import threading
import time

import pytest

from {{ cookiecutter.package_name }}.config import ConfigError, load_config
from {{ cookiecutter.package_name }}.failures import StoppedForGood
from {{ cookiecutter.package_name }}.sink.marker import Marker, marker_key, marker_value, parse_marker, shard_of
from {{ cookiecutter.package_name }}.sink.pinned_settings import FILE, PinnedSettings, check_and_pin, read_pinned
from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, PREPARED, LogEntry, SinkLog
from {{ cookiecutter.package_name }}.startup import preflight
from {{ cookiecutter.package_name }}.storage.layout_versions import UnknownFormat
from {{ cookiecutter.package_name }}.supervision.heartbeat import Heartbeat


def test_marker_log_entry_and_pinned_settings_carry_their_format_version(tmp_path):
    assert json.loads(marker_value("s", 0, 3, 10))["format"] == 1
    entry = LogEntry(batch_id=1, status=PREPARED, transactional_ids=["t"])
    assert json.loads(entry.to_json())["format"] == 2
    check_and_pin(str(tmp_path), PinnedSettings("s", "m", "p", 1))
    assert json.loads((tmp_path / FILE).read_text())["format"] == 1


def test_records_without_a_version_are_refused(tmp_path):
    """Every version of the job wrote one: a record without it was not written by the job."""
    with pytest.raises(UnknownFormat, match=r"marker in topic 'm': format version None, but this job reads version 1"):
        parse_marker(b'{"sink_id": "s", "shard": 0, "batch_id": 7, "records": 1}', "m")
    log = SinkLog(str(tmp_path), "s")
    (tmp_path / "sinks" / "s" / "log").mkdir(parents=True)
    (tmp_path / "sinks" / "s" / "log" / "2.json").write_text(json.dumps(
        {"batch_id": 2, "status": "committed", "transactional_ids": ["t"], "records_per_shard": [3]}))
    with pytest.raises(UnknownFormat, match=r"sinks/s/log/2\.json: format version None"):
        log.read(2)
    (tmp_path / FILE).write_text(json.dumps({"sink_id": "s", "marker_topic": "m", "transactional_id_prefix": "p",
                                             "commit_shards": 1}))
    with pytest.raises(UnknownFormat, match=rf"{FILE}: format version None"):
        read_pinned(str(tmp_path))
    assert parse_marker(marker_value("s", 0, 7, 1, "0123456789abcdef"), "m") == Marker(7, "0123456789abcdef")


def test_an_unknown_version_is_refused_naming_where_and_both_versions(tmp_path):
    with pytest.raises(UnknownFormat, match=r"marker in topic 'm': format version 2, but this job reads version 1"):
        parse_marker(b'{"format": 2, "batch_id": 7}', "m")
    (tmp_path / "sinks" / "s" / "log").mkdir(parents=True)
    (tmp_path / "sinks" / "s" / "log" / "2.json").write_text(json.dumps(
        {"format": 9, "batch_id": 2, "status": "committed", "transactional_ids": ["t"]}))
    with pytest.raises(UnknownFormat, match=r"sinks/s/log/2\.json: format version 9, but this job reads version 2"):
        SinkLog(str(tmp_path), "s").read(2)
    (tmp_path / FILE).write_text(json.dumps({"format": 3, "sink_id": "s", "marker_topic": "m",
                                             "transactional_id_prefix": "p", "commit_shards": 1}))
    with pytest.raises(UnknownFormat, match=rf"{FILE}: format version 3"):
        read_pinned(str(tmp_path))


def test_a_log_entry_of_the_first_layout_is_read_as_it_was_written(tmp_path):
    """Layout 1 is layout 2 but for what its digests hashed (recovery.rerun_mismatch): an entry a
    job of the version before wrote is read, and keeps its layout's number."""
    (tmp_path / "sinks" / "s" / "log").mkdir(parents=True)
    (tmp_path / "sinks" / "s" / "log" / "2.json").write_text(json.dumps(
        {"format": 1, "batch_id": 2, "status": "prepared", "transactional_ids": ["t"], "records_per_shard": [3],
         "digests_per_shard": ["00000000000000aa"], "source_offsets": {"sources": []}}))
    entry = SinkLog(str(tmp_path), "s").read(2)
    assert entry is not None and (entry.format, entry.records_per_shard, entry.status) == (1, [3], PREPARED)


def test_a_log_entry_moves_from_prepared_to_committed_and_nowhere_else():
    entry = LogEntry(batch_id=4, status="prepared", transactional_ids=["t"])
    assert entry.status is PREPARED
    committed = entry.committed(time.time())
    assert committed.status is COMMITTED and committed.committed_at is not None
    assert entry.status is PREPARED and entry.committed_at is None  # a value: the next entry is another one
    assert committed.committed(time.time()) is committed  # staying committed is no move
    with pytest.raises(dataclasses.FrozenInstanceError):
        committed.status = PREPARED  # type: ignore[misc]
    with pytest.raises(ValueError):
        LogEntry(batch_id=5, status="published", transactional_ids=["t"])


def test_a_marker_key_is_a_sinks_only_when_it_is_exactly_its_id_and_a_shard():
    assert shard_of(marker_key("a", 3), "a") == 3
    assert shard_of(marker_key("a-x", 0), "a") is None
    assert shard_of(marker_key("a", 0), "a-x") is None
    assert shard_of(b"a/x/0", "a") is None and shard_of(b"a/", "a") is None and shard_of(b"a/one", "a") is None
    assert shard_of(b"\xff\xfe/0", "a") is None


def test_the_heartbeat_survives_any_error_and_stops_the_job_when_it_cannot_write_for_too_long(tmp_path, monkeypatch,
                                                                                              caplog):
    from {{ cookiecutter.package_name }}.supervision import heartbeat

    failures = iter([KeyError("x"), RuntimeError("storage said no")])

    def flaky(fs, path, data):  # a KeyError, then failing for good
        raise next(failures, RuntimeError("storage said no"))

    monkeypatch.setattr(heartbeat, "write_atomic", flaky)
    lost = threading.Event()
    reasons: list[str] = []
    beat = Heartbeat(str(tmp_path), on_stop=lambda _reason: None,
                     on_lost=lambda reason: (reasons.append(reason), lost.set()), interval=0.05, stop_after=0.5)
    beat.start()
    try:
        assert lost.wait(5), "the heartbeat never said it was lost"
        assert beat.is_alive(), "an error ended the heartbeat thread"
    finally:
        beat.stop()
    assert len(reasons) == 1 and "could not be written for" in reasons[0] and "storage said no" in reasons[0]
    assert any("KeyError" in record.getMessage() for record in caplog.records)


def test_a_heartbeat_that_recovers_in_time_stops_nothing(tmp_path, monkeypatch):
    from {{ cookiecutter.package_name }}.storage import driver_presence
    from {{ cookiecutter.package_name }}.supervision import heartbeat

    real = heartbeat.write_atomic
    calls = {"n": 0}

    def once_broken(fs, path, data):
        calls["n"] += 1
        if calls["n"] <= 2:
            raise TypeError("a bug for a moment")
        real(fs, path, data)

    monkeypatch.setattr(heartbeat, "write_atomic", once_broken)
    lost: list[str] = []
    beat = Heartbeat(str(tmp_path), on_stop=lambda _reason: None, on_lost=lost.append, interval=0.05, stop_after=1.0)
    beat.start()
    # Its third write lands after two failures; a loaded machine may take a while to get there.
    deadline = time.monotonic() + 60
    while driver_presence.running_driver(str(tmp_path)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert driver_presence.running_driver(str(tmp_path)) is not None and lost == []
    beat.stop()


def test_a_driver_that_wakes_to_a_newer_drivers_heartbeat_yields_and_leaves_it(tmp_path):
    """A zombie: the heartbeat file is another driver's, fresh, of a driver started later. The
    older one says so once, stops beating and leaves the file; the newer one sees nothing."""
    from {{ cookiecutter.package_name }}.storage import driver_presence

    older = Heartbeat(str(tmp_path), on_stop=lambda _reason: None, on_lost=lambda _reason: None, interval=0.05)
    taken: list[str] = []
    older.on_taken_over = taken.append
    time.sleep(0.01)
    newer = Heartbeat(str(tmp_path), on_stop=lambda _reason: None, on_lost=lambda _reason: None, interval=0.05)
    older.beat["pid"] = newer.beat["pid"] + 1  # two processes
    newer.start()
    try:
        time.sleep(0.2)
        assert older.newer_driver() is not None and newer.newer_driver() is None
        older.start()
        older.join(5)
        assert not older.is_alive() and len(taken) == 1, taken
        assert taken[0].startswith(f"a newer driver runs on {tmp_path} (host ")
        older.stop()  # the older driver exits: the newer one's heartbeat stays
        assert driver_presence.running_driver(str(tmp_path))["started_at"] == newer.started_at
    finally:
        newer.stop()
    assert driver_presence.running_driver(str(tmp_path)) is None


def unreachable(tmp_path, **options: str):
    return load_config(None, {"bootstrap_servers": "127.0.0.1:9", "checkpoint_location": str(tmp_path / "ckpt"),
                              **options}, environ={})


def test_at_start_up_unreachable_kafka_fails_a_new_checkpoint_at_once_naming_bootstrap_servers(tmp_path):
    with pytest.raises(ConfigError, match=r"'bootstrap_servers': Kafka at 127\.0\.0\.1:9 did not answer"):
        preflight.check_kafka(unreachable(tmp_path), timeout=0.5)


def test_at_start_up_unreachable_kafka_is_waited_out_when_the_checkpoint_exists(tmp_path, monkeypatch, caplog):
    (tmp_path / "ckpt" / "offsets").mkdir(parents=True)
    (tmp_path / "ckpt" / "offsets" / "0").write_text("v1\n{}\n{}\n")
    monkeypatch.setattr(preflight, "STARTUP_RETRY_SECONDS", 0.1)
    with pytest.raises(StoppedForGood, match=r"Kafka at 127.0.0.1:9 in an outage for \d+s at start-up, past "
                                     r"kafka_outage_tolerance_seconds \(2\)"):
        preflight.check_kafka(unreachable(tmp_path, kafka_outage_tolerance_seconds="2"), timeout=0.5)
    assert any("the checkpoint exists, waiting" in record.getMessage() for record in caplog.records)
