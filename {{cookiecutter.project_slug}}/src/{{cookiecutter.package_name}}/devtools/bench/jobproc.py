"""Contenders 1 and 2: this job, run exactly as `<package> run --set ...` runs it (cli._run),
plus a streaming query listener that appends each batch's progress JSON to a file, so the
benchmark can tell where a batch's time goes (durationMs: latestOffset, addBatch, walCommit...).

    python -m <package>.devtools.bench.jobproc --progress-file F --set option=value ...
"""

from __future__ import annotations

import argparse
import sys

from .progress import record_progress


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--progress-file", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE")
    args = parser.parse_args(argv)

    import logging

    from ...config import load_config
    from ...job import spark_session
    from ...preflight import check_before_spark
    from ...runner import StopRequested, run
    from ...sink import faults

    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    config = load_config(None, dict(item.split("=", 1) for item in args.set))
    check_before_spark(config)
    faults.record_driver_process_group()
    stop = StopRequested()
    stop.install()
    spark = spark_session(config)
    progress = record_progress(spark, args.progress_file)
    try:
        run(spark, config, stop)
    finally:
        spark.stop()
        progress.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
