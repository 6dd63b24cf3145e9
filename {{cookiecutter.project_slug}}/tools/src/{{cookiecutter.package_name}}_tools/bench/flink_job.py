"""Contender: Flink's exactly-once Kafka pipeline, the peer a team weighs first for exactly-once:
PyFlink's Table API in a local mini-cluster (inside this process's JVM, as `python job.py` runs
it), the same query as the job's count:

    Kafka source (read_committed) → JSON parse → filter → count per key → upsert-Kafka sink,
    `sink.delivery-guarantee = exactly-once`: Kafka transactions committed at each checkpoint

Checkpoints every `--checkpoint-ms` (Flink commits its transactions at each checkpoint: its
latency knob, as the trigger is the job's), RocksDB state, retained on disk so that a start after
SIGKILL restores the newest one, as a team running a mini-cluster would (Flink aborts the killed
run's open transactions when it restores). The aggregation's mini-batch (Flink's own tuning for
an upsert aggregation) buffers changes for one checkpoint interval, so that the sink writes a
key's count once per interval, as the job writes it once per batch.

What it counts, in Flink's JSON format's semantics (documented, not the job's): a record that is
not JSON is skipped (`json.ignore-parse-errors`), a key that is not a string is coerced to one, and
nothing reaches a dead-letter topic (Flink SQL has none). The bench's events are all well formed,
so both count the same.

Runs under the Flink venv's Python (bench/flink_env.py), importing only PyFlink and the standard
library:

    <flink venv>/bin/python flink_job.py --bootstrap B --input T --output O --key-field color ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def newest_checkpoint(directory: Path) -> Path | None:
    """The newest completed checkpoint under `directory` (its `chk-N` with `_metadata`), or None."""
    completed = [metadata.parent for metadata in directory.glob("*/chk-*/_metadata")]
    return max(completed, key=lambda path: int(path.name.removeprefix("chk-")), default=None)


def quoted(text: str) -> str:
    """A Flink SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def options(settings: dict[str, str]) -> str:
    return ",\n".join(f"  {quoted(name)} = {quoted(value)}" for name, value in settings.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--input", "--output", "--key-field", "--checkpoints", "--transactional-id-prefix",
                 "--connector-jar"):
        parser.add_argument(name, required=True)
    parser.add_argument("--excluded", default=None, help="the key value the filter drops")
    parser.add_argument("--checkpoint-ms", type=int, default=500)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--transaction-timeout-ms", type=int, default=600_000,
                        help="at or below the broker's transaction.max.timeout.ms (Flink's default of an hour "
                             "makes InitProducerId fail)")
    args = parser.parse_args(argv)

    from pyflink.table import EnvironmentSettings, TableEnvironment

    checkpoints = Path(args.checkpoints).resolve()
    checkpoints.mkdir(parents=True, exist_ok=True)
    settings = {
        "parallelism.default": str(args.parallelism),
        "pipeline.jars": Path(args.connector_jar).resolve().as_uri(),
        "execution.checkpointing.interval": f"{args.checkpoint_ms} ms",
        "execution.checkpointing.mode": "EXACTLY_ONCE",
        "execution.checkpointing.dir": checkpoints.as_uri(),
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "execution.checkpointing.num-retained": "2",
        "state.backend.type": "rocksdb",
        "table.exec.mini-batch.enabled": "true",
        "table.exec.mini-batch.allow-latency": f"{args.checkpoint_ms} ms",
        "table.exec.mini-batch.size": "50000",
    }
    restored = newest_checkpoint(checkpoints)
    if restored is not None:
        settings["execution.state-recovery.path"] = restored.as_uri()
    print(json.dumps({"flink_settings": settings}), flush=True)
    environment = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for name, value in settings.items():
        environment.get_config().set(name, value)
    key = args.key_field.replace("`", "``")
    environment.execute_sql(f"""CREATE TABLE events (`{key}` STRING) WITH (
{options({"connector": "kafka", "topic": args.input, "properties.bootstrap.servers": args.bootstrap,
          "properties.group.id": f"{args.transactional_id_prefix}-source",
          "properties.isolation.level": "read_committed", "scan.startup.mode": "earliest-offset",
          "format": "json", "json.ignore-parse-errors": "true", "json.fail-on-missing-field": "false"})}
)""")
    environment.execute_sql(f"""CREATE TABLE counts (`key` STRING, `count` BIGINT, PRIMARY KEY (`key`) NOT ENFORCED)
WITH (
{options({"connector": "upsert-kafka", "topic": args.output, "properties.bootstrap.servers": args.bootstrap,
          "key.format": "raw", "value.format": "json", "sink.delivery-guarantee": "exactly-once",
          "sink.transactional-id-prefix": args.transactional_id_prefix,
          "properties.transaction.timeout.ms": str(args.transaction_timeout_ms)})}
)""")
    kept = "" if args.excluded is None else f" AND `{key}` <> {quoted(args.excluded)}"
    result = environment.execute_sql(
        f"INSERT INTO counts SELECT `{key}` AS `key`, COUNT(*) AS `count` FROM events "
        f"WHERE `{key}` IS NOT NULL{kept} GROUP BY `{key}`")
    print("flink: job submitted" + ("" if restored is None else f", restored from {restored}"), flush=True)
    result.wait()  # until the process is stopped (SIGTERM) or killed
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
