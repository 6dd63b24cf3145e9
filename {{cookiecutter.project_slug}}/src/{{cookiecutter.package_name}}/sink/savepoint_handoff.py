"""What a savepoint takes from the sink and asks of it: which batch each commit shard last
published (the savepoint's `published`, and what a restore compares), and, before a job is saved
or restored, no transaction of a stopped driver left open (its markers then are settled)."""

from __future__ import annotations

import dataclasses

from ..config import JobConfig
from .marker import read_markers
from .pinned_settings import read_pinned
from .producers import fence
from .settings import SinkSettings


def published_batches(config: JobConfig, sink_id: str, settled: bool = True) -> dict[int, int]:
    """The last batch each shard of `sink_id` published: {shard: batch id} (marker.read_markers;
    `settled`: past any open transaction of the sink's own, which then is waited for)."""
    return read_markers(config.bootstrap_servers, config.marker_topic, sink_id, config.kafka, settled=settled)


def fence_stopped_job(settings: SinkSettings) -> None:
    """Abort a transaction the stopped job may have left open (it was killed mid-commit): the
    savepoint's markers must be settled, and the restored job's new transactional ids would
    never abort it (read_committed consumers would wait for its time-out). The ids are the ones
    the stopped job used (pinned in its checkpoint), whatever the configuration says now."""
    pinned = read_pinned(settings.checkpoint)
    if pinned is not None:
        settings = dataclasses.replace(settings, sink_id=pinned.sink_id, shards=pinned.commit_shards,
                                       transactional_id_prefix=pinned.transactional_id_prefix)
    fence(settings)
