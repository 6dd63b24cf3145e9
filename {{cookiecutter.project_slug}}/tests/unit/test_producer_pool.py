"""The sink's producer pool: its shards started beside the first batch, or again if that failed."""

from __future__ import annotations

from typing import ClassVar

from {{ cookiecutter.package_name }}.sink import producers
from {{ cookiecutter.package_name }}.sink.marker import Marker
from {{ cookiecutter.package_name }}.sink.settings import SinkSettings

SETTINGS = SinkSettings(bootstrap_servers="127.0.0.1:1", checkpoint="/tmp/none", sink_id="pool", marker_topic="m",
                        transactional_id_prefix="t", shards=2, commit_timeout_seconds=30, client={})


class Shard:
    started: ClassVar[list[int]] = []

    def __init__(self, settings: SinkSettings, shard: int) -> None:
        Shard.started.append(shard)
        self.shard, self.transactional_id = shard, settings.transactional_id(shard)
        self.published, self.published_offsets = -1, ""
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
    assert [(s.shard, s.published, s.published_offsets) for s in shards] == [(0, -1, ""), (1, 4, "d")]


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
    assert [(s.shard, s.published) for s in shards] == [(0, 7), (1, -1)]
