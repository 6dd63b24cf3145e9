"""Every case of recovery, as a call of the coordinator's pure decision (sink/recovery.py): what
batch N does given its figures, the sink log's entries and each shard's marker. The same cases
through commit_batch with a fake producer are in test_coordinator.py, with crashes on a real
broker in tests/integration/."""

from __future__ import annotations

import dataclasses

import pytest

from {{ cookiecutter.package_name }}.sink.invariants import MarkersWentBack
from {{ cookiecutter.package_name }}.sink.marker import NO_BATCH, Marker
from {{ cookiecutter.package_name }}.sink.recovery import (
    Action,
    BatchFigures,
    Decision,
    ShardState,
    decide,
    markers_ahead,
)
from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, PREPARED, LogEntry
from {{ cookiecutter.package_name }}.storage.checkpoint import SourceOffsets

N = 7
OFFSETS = SourceOffsets(({"events": {"0": 40, "1": 12}},))
FIGURES = BatchFigures(rows_per_shard=(3, 2), digests_per_shard=("00000000000000aa", "00000000000000bb"),
                       source_offsets=OFFSETS)


def shards(*batches: int, offsets: str = OFFSETS.digest()) -> list[ShardState]:
    """Shard i's marker at batches[i], naming `offsets` (this run's, unless said otherwise)."""
    return [ShardState(shard, f"t-{shard}", batch, offsets if batch != NO_BATCH else "")
            for shard, batch in enumerate(batches)]


def entry(batch_id: int = N, status=PREPARED, figures: BatchFigures = FIGURES) -> LogEntry:
    return LogEntry(batch_id=batch_id, status=status, transactional_ids=["t-0", "t-1"],
                    records_per_shard=list(figures.rows_per_shard), digests_per_shard=list(figures.digests_per_shard),
                    source_offsets=figures.source_offsets, records=sum(figures.rows_per_shard))


BEFORE = entry(N - 1, COMMITTED, BatchFigures((1, 1), ("01", "02"), SourceOffsets(({"events": {"0": 30, "1": 12}},))))


def test_a_fresh_batch_is_published_by_every_shard():
    assert decide(N, FIGURES, None, BEFORE, shards(N - 1, N - 1)) == Decision(Action.PUBLISH, shards=(0, 1))
    # The job's first batch: no marker, no entry before it.
    assert decide(0, FIGURES, None, None, shards(NO_BATCH, NO_BATCH)) == Decision(Action.PUBLISH, shards=(0, 1))


def test_a_rerun_after_a_crash_before_the_kafka_commit_is_published_by_every_shard():
    """The entry says prepared, no marker has N: the crash came before any shard's commit."""
    assert decide(N, FIGURES, entry(), BEFORE, shards(N - 1, N - 1)) == Decision(Action.PUBLISH, shards=(0, 1))


def test_a_crash_between_two_shards_commits_leaves_the_second_shard_to_publish():
    assert decide(N, FIGURES, entry(), BEFORE, shards(N, N - 1)) == Decision(
        Action.PUBLISH, shards=(1,), published_before=(0,))


def test_a_crash_after_every_kafka_commit_publishes_nothing_and_only_marks_the_log():
    """Every marker has N, the entry still says prepared: nothing to publish, the entry to commit."""
    assert decide(N, FIGURES, entry(), BEFORE, shards(N, N)) == Decision(
        Action.PUBLISH, shards=(), published_before=(0, 1))
    # Nothing is published, so the offsets are not compared: here they would go back.
    gone = entry(N - 1, COMMITTED, BatchFigures((1, 1), ("01", "02"), SourceOffsets(({"events": {"0": 99}},))))
    assert decide(N, FIGURES, entry(), gone, shards(N, N)).action is Action.PUBLISH


def test_a_batch_the_log_says_committed_publishes_nothing():
    assert decide(N, FIGURES, entry(status=COMMITTED), BEFORE, shards(N, N)) == Decision(
        Action.ALREADY_COMMITTED, published_before=(0, 1))


def test_a_marker_ahead_of_the_batch_means_the_checkpoint_is_behind_the_output_whatever_the_log_says():
    expected = Decision(Action.CHECKPOINT_BEHIND_OUTPUT, shards=(1,))
    assert decide(N, FIGURES, None, BEFORE, shards(N - 1, N + 2)) == expected
    assert decide(N, FIGURES, entry(status=COMMITTED), BEFORE, shards(N, N + 2)) == expected


def test_a_marker_at_the_batch_from_other_source_offsets_means_the_checkpoint_is_behind_the_output():
    """One batch behind: N was published from other offsets than this checkpoint's offsets/N."""
    assert decide(N, FIGURES, None, BEFORE, shards(N, N, offsets="0123456789abcdef")) == Decision(
        Action.CHECKPOINT_BEHIND_OUTPUT, shards=(0, 1))


def test_source_offsets_that_go_back_or_a_partition_gone_stop_the_batch_naming_them():
    back = BatchFigures((3, 2), FIGURES.digests_per_shard, SourceOffsets(({"events": {"0": 25}},)))
    assert decide(N, back, None, BEFORE, shards(N - 1, N - 1)) == Decision(
        Action.SOURCE_OFFSETS_WENT_BACK, problems=("events/0 went back from 30 to 25", "events/1 (at 12) is gone"))
    # A partition added, or a source of another kind, is no problem.
    added = BatchFigures((3, 2), FIGURES.digests_per_shard,
                         SourceOffsets(({"events": {"0": 40, "1": 12, "2": 5}}, 17)))
    assert decide(N, added, None, BEFORE, shards(N - 1, N - 1)).action is Action.PUBLISH


def test_a_rerun_with_other_figures_is_reported_not_refused():
    first = entry(figures=BatchFigures((3, 2), ("00000000000000aa", "00000000000000cc"), OFFSETS))
    # The crash between the two shards' commits: shard 0 holds the first attempt's records.
    assert decide(N, FIGURES, first, BEFORE, shards(N, N - 1)) == Decision(
        Action.PUBLISH, shards=(1,), rerun_mismatch=(1,), published_before=(0,))
    other_rows = entry(status=COMMITTED, figures=BatchFigures((4, 2), FIGURES.digests_per_shard, OFFSETS))
    assert decide(N, FIGURES, other_rows, BEFORE, shards(N, N)) == Decision(
        Action.ALREADY_COMMITTED, rerun_mismatch=(0,), published_before=(0, 1))
    # The same figures: nothing to report.
    assert decide(N, FIGURES, entry(), BEFORE, shards(N, N - 1)).rerun_mismatch == ()


def test_a_rerun_against_an_entry_of_the_first_layout_is_compared_by_its_rows_alone():
    """Layout 1's digests hashed each value with its batch id, which this version stamps on after
    hashing: a re-run's digests cannot equal them, its row counts still must."""
    first = dataclasses.replace(entry(figures=BatchFigures((3, 2), ("00000000000000ff", "00000000000000ee"),
                                                           OFFSETS)), format=1)
    assert decide(N, FIGURES, first, BEFORE, shards(N, N - 1)).rerun_mismatch == ()
    fewer = dataclasses.replace(entry(figures=BatchFigures((3, 1), FIGURES.digests_per_shard, OFFSETS)), format=1)
    assert decide(N, FIGURES, fewer, BEFORE, shards(N, N - 1)).rerun_mismatch == (1,)


def test_markers_that_went_back_stop_the_batch_whatever_else_holds():
    went_back = [ShardState(0, "t-0", N), ShardState(1, "t-1", N + 2, "x", went_back_to=N - 3)]
    assert decide(N, FIGURES, entry(status=COMMITTED), BEFORE, went_back) == Decision(
        Action.MARKERS_WENT_BACK, shards=(1,))
    assert ShardState.of_marker(1, "t-1", Marker(9, "x", went_back_to=4)).went_back_to == 4


def test_the_checkpoint_older_than_the_output_check_is_one_for_the_coordinator_and_the_start_up_check():
    """markers_ahead over a shard's marker as read (preflight) or as its state (the coordinator)."""
    digest = OFFSETS.digest()
    read = {0: Marker(5, "x"), 1: Marker(9, "y"), 2: Marker(N, "other"), 3: Marker(N, digest)}
    assert markers_ahead(N, digest, read) == {1: Marker(9, "y"), 2: Marker(N, "other")}
    assert list(markers_ahead(N, digest, {state.shard: state for state in shards(N + 1, N)})) == [0]
    assert markers_ahead(N, digest, {}) == {}


def test_a_shards_state_is_what_its_marker_says():
    assert ShardState.of_marker(1, "t-1", Marker(4, "d")) == ShardState(1, "t-1", 4, "d")
    assert ShardState.of_marker(0, "t-0", None) == ShardState(0, "t-0", NO_BATCH, "")


def test_source_offsets_are_parsed_once_and_keep_what_spark_wrote(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "3").write_text('v1\n{"batchWatermarkMs":0}\n{"events":{"1":5,"0":10}}\n7\n')
    offsets = SourceOffsets.of_batch(str(tmp_path), 3)
    assert offsets.kafka == ({"events": {"1": 5, "0": 10}}, None)  # a source of another kind: not compared
    assert offsets.topic("events") == {"0": 10, "1": 5} and offsets.topic("other") == {}
    assert offsets.to_json() == {"sources": [{"events": {"1": 5, "0": 10}}, 7]}
    assert SourceOffsets.from_json(offsets.to_json()) == offsets
    # The digest markers carry is the one earlier versions of the job wrote.
    assert offsets.digest() == "759ff271f49811d8"
    assert SourceOffsets.of_batch(str(tmp_path), 4) == SourceOffsets()


def test_the_start_up_check_asks_the_same_of_the_last_planned_batch(tmp_path, monkeypatch):
    from {{ cookiecutter.package_name }}.config import ConfigError, load_config
    from {{ cookiecutter.package_name }}.sink import start_checks

    (tmp_path / "offsets").mkdir()
    for batch_id in (0, 1):
        (tmp_path / "offsets" / str(batch_id)).write_text('v1\n{}\n{"events":{"0":5}}\n')
    digest = SourceOffsets.of_batch(str(tmp_path), 1).digest()
    config = load_config(None, {"delivery_guarantee": "exactly-once", "checkpoint_location": str(tmp_path)},
                         environ={})
    found: dict[int, Marker] = {}
    monkeypatch.setattr(start_checks, "read_marker_values", lambda *args, **kwargs: found)
    found.update({0: Marker(1, digest)})  # batch 1 published from these offsets: a re-run of it, if any
    start_checks.check_checkpoint_against_markers(config)
    found.update({0: Marker(1, "0123456789abcdef")})
    with pytest.raises(ConfigError, match=r"'checkpoint_location'.*published batch 1 from other source offsets"):
        start_checks.check_checkpoint_against_markers(config)
    found.update({0: Marker(1, digest), 1: Marker(3, digest)})
    with pytest.raises(ConfigError, match=r"'checkpoint_location'.*plans batches up to 1.*already published batch 3:"):
        start_checks.check_checkpoint_against_markers(config)
    found.update({0: Marker(1, digest, went_back_to=0), 1: Marker(1, digest)})
    with pytest.raises(MarkersWentBack, match=r"shard 0's batch markers in .* went back: one said batch 1 was "
                                              r"published, a later one batch 0"):
        start_checks.check_checkpoint_against_markers(config)
