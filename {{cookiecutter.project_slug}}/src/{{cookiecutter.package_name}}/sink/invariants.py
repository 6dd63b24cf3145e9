"""What the sink relies on, and the refusal of each when it does not hold: nothing of the batch
is published, and no restart can help. The coordinator refuses them while it publishes, a
publishing task where it reads a marker, the start-up checks before the first batch."""

from __future__ import annotations

from ..failures import JobFailure, Outcome
from .recovery import MarkerFacts
from .settings import SinkSettings


class InvariantBroken(JobFailure, RuntimeError):
    """What the sink relies on does not hold; nothing of the batch was published, and no restart
    can help: the job stops for good, whatever the restart strategy."""

    outcome = Outcome.CANNOT_CONTINUE


class CheckpointBehindOutput(InvariantBroken):
    """A shard's marker is past the batch: the checkpoint is older than the sink's output."""

    outcome = Outcome.FIX_SETTING
    option = "checkpoint_location"


class SourceOffsetsWentBack(InvariantBroken):
    """The batch's source offsets are behind the previous batch's, or a partition disappeared."""

    outcome = Outcome.FIX_SETTING
    option = "checkpoint_location"


class RerunMismatch(InvariantBroken):
    """A batch re-run computed other records than its first attempt, some of whose shards are
    published: the rest would come from another computation (on_rerun_mismatch = "fail")."""

    outcome = Outcome.FIX_SETTING
    option = "on_rerun_mismatch"


class MarkersWentBack(InvariantBroken):
    """A shard's batch marker named a lower batch than an earlier marker of the shard had."""


def markers_went_back(sink_id: str, marker_topic: str, shard: int, marker: MarkerFacts) -> MarkersWentBack:
    """The refusal of markers that went back, for the coordinator and the start-up check."""
    return MarkersWentBack(
        f"sink {sink_id!r}: shard {shard}'s batch markers in {marker_topic!r} went back: one said batch "
        f"{marker.batch_id} was published, a later one batch {marker.went_back_to}. Only this sink's producers "
        "write its markers, in batch order, so another writer wrote these (another job with the same sink_id, or "
        "a tool), and which batches are published can no longer be told. Nothing was published. Stop any other "
        f"job with sink_id {sink_id!r}, then start afresh with a new sink_id and a new checkpoint_location, or "
        "from a savepoint.")


def checkpoint_behind_output(settings: SinkSettings, batch_id: int, marker_batch: int, shard: int,
                             published: str) -> CheckpointBehindOutput:
    """The refusal of a marker ahead of batch N (at N: from other source offsets), read by the
    coordinator or by a publishing task; `published` says what was published of the batch."""
    return CheckpointBehindOutput(
        f"batch {batch_id} is planned by {settings.checkpoint}, but "
        f"sink {settings.sink_id!r} already published batch {marker_batch}"
        f"{' from other source offsets' if marker_batch == batch_id else ''} (shard {shard}'s marker in "
        f"{settings.marker_topic!r}): the checkpoint is older than the output (restored from a copy, or a second "
        f"checkpoint under the same sink_id). {published} Put back the checkpoint the job last ran "
        "with, or start afresh with a new sink_id and a new checkpoint_location.")
