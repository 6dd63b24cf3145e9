"""The sink's producer pool: its shards started beside the first batch, or again if that failed."""

from __future__ import annotations

from typing import ClassVar

from {{ cookiecutter.package_name }}.sink import producers
from {{ cookiecutter.package_name }}.sink.marker import Marker
from {{ cookiecutter.package_name }}.sink.recovery import ShardState
from {{ cookiecutter.package_name }}.sink.settings import SinkSettings

SETTINGS = SinkSettings(bootstrap_servers="127.0.0.1:1", checkpoint="/tmp/none", sink_id="pool", marker_topic="m",
                        transactional_id_prefix="t", shards=2, commit_timeout_seconds=30, client={})


class Shard:
    started: ClassVar[list[int]] = []

    def __init__(self, settings: SinkSettings, shard: int) -> None:
        Shard.started.append(shard)
        self.shard, self.transactional_id = shard, settings.transactional_id(shard)
        self.producer = self

    def flush(self, _timeout: float) -> None:
        pass


def test_shards_started_meanwhile_are_the_ones_the_first_batch_gets(monkeypatch):
    Shard.started = []
    monkeypatch.setattr(producers, "CommitShard", Shard)
    monkeypatch.setattr(producers, "ensure_marker_topic", lambda *args: None)
    monkeypatch.setattr(producers, "read_marker_values", lambda *args, **kwargs: {1: Marker(4, "d")})
    pool = producers.ProducerPool()
    pool.start_meanwhile(SETTINGS)
    shards = pool.shards_for(SETTINGS)
    assert Shard.started == [0, 1]  # started once, in the background
    assert [s.shard for s in shards] == [0, 1]
    assert [(r.shard, r.batch_id, r.source_offsets) for r in pool.states(SETTINGS)] == [(0, -1, ""), (1, 4, "d")]


def test_a_start_that_failed_meanwhile_is_done_again_with_the_batch(monkeypatch):
    Shard.started = []
    reads = []

    def read_marker_values(*args, **kwargs):
        reads.append(1)
        if len(reads) == 1:
            raise RuntimeError("the broker did not answer")  # after both producers started
        return {0: Marker(7, "x")}

    monkeypatch.setattr(producers, "CommitShard", Shard)
    monkeypatch.setattr(producers, "ensure_marker_topic", lambda *args: None)
    monkeypatch.setattr(producers, "read_marker_values", read_marker_values)
    pool = producers.ProducerPool()
    pool.start_meanwhile(SETTINGS)
    shards = pool.shards_for(SETTINGS)
    # The half-started shards (producers without their markers) were dropped and started again.
    assert Shard.started == [0, 1, 0, 1]
    assert [s.shard for s in shards] == [0, 1]
    assert [(r.shard, r.batch_id) for r in pool.states(SETTINGS)] == [(0, 7), (1, -1)]


def test_a_commit_gives_the_shard_a_new_state_and_a_reset_reads_the_markers_again(monkeypatch):
    Shard.started = []
    markers = {1: Marker(4, "d")}
    monkeypatch.setattr(producers, "CommitShard", Shard)
    monkeypatch.setattr(producers, "ensure_marker_topic", lambda *args: None)
    monkeypatch.setattr(producers, "read_marker_values", lambda *args, **kwargs: dict(markers))
    pool = producers.ProducerPool()
    pool.shards_for(SETTINGS)
    started = pool.states(SETTINGS)
    pool.committed(SETTINGS, ShardState(1, SETTINGS.transactional_id(1), 5, "e"))
    assert [(r.batch_id, r.source_offsets) for r in pool.states(SETTINGS)] == [(-1, ""), (5, "e")]
    assert started[1] == ShardState(1, SETTINGS.transactional_id(1), 4, "d")  # replaced, not changed
    markers[0] = Marker(5, "f")
    pool.reset()
    pool.shards_for(SETTINGS)
    assert Shard.started == [0, 1, 0, 1]
    assert [(r.batch_id, r.source_offsets) for r in pool.states(SETTINGS)] == [(5, "f"), (4, "d")]
