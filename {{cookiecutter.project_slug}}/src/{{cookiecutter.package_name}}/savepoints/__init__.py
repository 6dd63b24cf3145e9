"""Savepoints: a portable snapshot of the job, taken on purpose, from which a changed or
rescaled job resumes where the old one stopped (Flink's savepoints, on Spark).

A savepoint is a directory (local path or s3://):

    manifest.json       written last: format version, the batch it was taken at, the source
                        offsets after that batch, the sink's last published batch per shard,
                        the configuration that decides what an answer means, the answer's
                        state columns, checksums
    state/*.parquet     every key's state (state_schema: key, the answer's state columns as
                        pipeline/aggregates.py keeps them, and with a state TTL the time the
                        key expires), read from the checkpoint with Spark's state data source

Spark's checkpoint is tied to the query's plan and its shuffle partitions; a savepoint is not.
`run --from-savepoint PATH` starts a *new* checkpoint from it:

- the source starts at the savepoint's offsets;
- the keys' state enters the new checkpoint's state in its first batch, and only in it (a re-run of
  batch 0 reads them again, no later batch does): for Spark's aggregation as a second,
  one-shot streaming source (Spark's file source records in the checkpoint that it read them),
  merged with the events (pipeline/counting.py); for the TTL operator as transformWithState's initial state, which
  Spark applies in batch 0. A key is published only when events change it, not for its seed;
- with a state TTL, a key's state in the savepoint carries its expiry. A key expired by the
  time of the savepoint is left out (the job had forgotten it; Spark had not yet evicted it);
  one expired by the time of a restore with a TTL is not seeded (as a restart of the old
  checkpoint would have dropped it); a seeded key's TTL starts again at the restore (it lives
  up to one TTL longer than in the old job, never shorter);
- batch ids start at 0 again, so the sink gets a new identity: generation g+1 of the sink id
  (`<sink_id>.g<g+1>`: its own markers and transactional ids). The savepoint records the
  generation it was taken from; the new checkpoint records the one it runs (origin file).

Unsafe restores are refused: another format version, a state file that does not match its
checksum, another key field or schema, an answer kept in other state columns, a savepoint older
than what its sink published since, a savepoint that a checkpoint already started from, a
non-empty checkpoint.

The package's modules: origin.py (a checkpoint's origin and what it changes), manifest.py,
state.py (reading each key's state), create.py, restore.py; commands.py runs them for the CLI.
"""

from .create import create, savepoint_batch
from .manifest import (
    FORMAT_VERSION,
    MANIFEST,
    MEANING,
    QUERY_FINGERPRINT,
    RECORDED,
    STATE_DIR,
    Manifest,
    SavepointError,
    declared_state,
    read_manifest,
    state_schema,
)
from .origin import (
    ORIGIN_FILE,
    SEED_DIR,
    Origin,
    apply_origin,
    effective_config,
    first_batch_id,
    generation_sink_id,
    read_origin,
    seed_location,
)
from .restore import check_restorable, start_from
from .state import read_state

__all__ = ["FORMAT_VERSION", "MANIFEST", "MEANING", "ORIGIN_FILE", "QUERY_FINGERPRINT", "RECORDED", "SEED_DIR",
           "STATE_DIR", "Manifest", "Origin", "SavepointError", "apply_origin", "check_restorable", "create",
           "declared_state", "effective_config", "first_batch_id", "generation_sink_id", "read_manifest",
           "read_origin", "read_state", "savepoint_batch", "seed_location", "start_from", "state_schema"]
