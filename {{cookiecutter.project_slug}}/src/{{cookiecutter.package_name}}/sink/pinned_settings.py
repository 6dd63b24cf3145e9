"""The sink settings a checkpoint was made with, kept in it (`<checkpoint>/sink-settings.json`).

Batch N's fate after a crash is decided by the markers of *these* settings: the sink id and
marker topic say where to look, the shard count which markers must agree, the transactional
id prefix which producer to fence. Change one while a batch is in doubt (planned in
`offsets/N`, not yet in `commits/N`) and its re-run is judged against the wrong markers: with
fewer shards a published batch is taken for unpublished and published again; with more, or
renamed, the same. So a change is accepted only when no batch is in doubt."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..failures import JobFailure, Outcome
from ..storage import checkpoint
from ..storage.layout_versions import read_pinned_file, write_pinned_file

FILE = "sink-settings.json"
PINNED_FORMAT = 1  # the file's layout (storage/layout_versions.py)


@dataclass(frozen=True)
class PinnedSettings:
    sink_id: str
    marker_topic: str
    transactional_id_prefix: str
    commit_shards: int


class PinnedSettingChanged(JobFailure, ValueError):
    """A setting pinned by the checkpoint changed while a batch is in doubt (preflight: a ConfigError)."""

    outcome = Outcome.FIX_SETTING

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option  # type: ignore[misc]


def in_doubt_batch(location: str) -> int | None:
    """The batch Spark planned but did not commit (a crash between the two), if any."""
    planned, committed = checkpoint.planned_batches(location), checkpoint.committed_batches(location)
    if planned and (not committed or planned[-1] > committed[-1]):
        return planned[-1]
    return None


def check_and_pin(location: str, current: PinnedSettings) -> list[str]:
    """Refuse a change while a batch is in doubt; otherwise record `current`. Returns the
    options that changed (accepted, because no batch was in doubt)."""
    recorded = read_pinned(location)
    changed = [] if recorded is None else [
        name for name, value in asdict(current).items() if getattr(recorded, name) != value]
    if changed and (batch := in_doubt_batch(location)) is not None:
        name = changed[0]
        raise PinnedSettingChanged(
            name, f"changed from {getattr(recorded, name)!r} to {getattr(current, name)!r}, but batch {batch} is "
            "in doubt (planned, not committed: the job stopped abruptly). Its re-run must be judged by the "
            f"settings it was published with: run once more with {name}={getattr(recorded, name)!r} until it "
            "has committed (`run --until-idle 1`, or stop it with SIGTERM), then change it.")
    if recorded is None or changed:
        write_pinned_file(location, FILE, PINNED_FORMAT, asdict(current))
    return changed


def read_pinned(location: str) -> PinnedSettings | None:
    """The settings the checkpoint's batches were published with, if it recorded them."""
    fields = read_pinned_file(location, FILE, PINNED_FORMAT)
    return None if fields is None else PinnedSettings(**fields)
