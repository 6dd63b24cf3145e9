"""Spark's progress of every batch, one JSON line each, for the bench to read afterwards."""

from __future__ import annotations

from typing import IO


def record_progress(spark, path: str) -> IO[str]:  # a SparkSession (pyspark is imported lazily)
    """Append each query progress event to `path`; returns the open file, to close at the end."""
    from pyspark.sql.streaming import StreamingQueryListener

    progress = open(path, "a", buffering=1)  # noqa: SIM115 - open for the whole run

    class ProgressToFile(StreamingQueryListener):
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            progress.write(event.progress.json.replace("\n", " ") + "\n")

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

    spark.streams.addListener(ProgressToFile())
    return progress
