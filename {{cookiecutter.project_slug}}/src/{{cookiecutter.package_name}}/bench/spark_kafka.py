"""Contender 3: Spark's built-in Kafka source and sink (the JVM connector), the same parse,
filter and count (groupBy count, update mode, RocksDB state as this job), at-least-once.

The connector's jars are resolved once with Maven into ~/.cache/kafka-local (as kafka_local
resolves the broker's), for the version of the installed pyspark. When Maven cannot get that
version, `connector_versions` falls back to the newest one listed in FALLBACK_VERSIONS, and the
results say so.

    python -m <package>.bench.spark_kafka --jars a.jar,b.jar --bootstrap B --input T ...
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .progress import record_progress

SCALA = "2.13"
# (connector, token provider) versions tried after the exact one; the token provider's POM
# is pinned because some repositories lack the connector's own version of it.
FALLBACK_VERSIONS = (("4.2.0", "4.0.0"), ("4.1.0", "4.0.0"), ("4.0.0", "4.0.0"))
# The connector's own jars; its other dependencies (scala, hadoop, lz4, ...) are Spark's own.
CONNECTOR_ARTIFACTS = ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2")

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.bench</groupId>
  <artifactId>spark-kafka-connector</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement><dependencies><dependency>
    <groupId>org.apache.spark</groupId><artifactId>spark-token-provider-kafka-0-10_SCALA</artifactId>
    <version>TOKEN</version>
  </dependency></dependencies></dependencyManagement>
  <dependencies><dependency>
    <groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_SCALA</artifactId>
    <version>CONNECTOR</version>
  </dependency></dependencies>
</project>
"""
# Spark's parent POM lists a Google mirror of Maven Central first; where it is unreachable,
# Maven gives up instead of trying Central, so it is mapped to Central.
_SETTINGS = """<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0"><mirrors><mirror>
  <id>central-for-gcs-mirror</id><mirrorOf>gcs-maven-central-mirror</mirrorOf>
  <url>https://repo.maven.apache.org/maven2</url>
</mirror></mirrors></settings>
"""


def pom(connector: str, token: str) -> str:
    return _POM.replace("SCALA", SCALA).replace("CONNECTOR", connector).replace("TOKEN", token)


def _resolve(connector: str, token: str, log=print) -> list[str] | None:
    from ..kafka_local.process import _require, cache_root

    text = pom(connector, token)
    target = cache_root() / f"spark-sql-kafka-{connector}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    jars = target / "jars"
    target.mkdir(parents=True, exist_ok=True)
    with open(target / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "complete").exists():
            if (target / "failed").exists() and time.time() - (target / "failed").stat().st_mtime < 3600:
                return None  # tried within the hour: do not ask the repository again
            (target / "pom.xml").write_text(text)
            (target / "settings.xml").write_text(_SETTINGS)
            staging = target / "jars.partial"
            shutil.rmtree(staging, ignore_errors=True)
            command = [_require("mvn", "maven"), "-B", "-q", "-f", str(target / "pom.xml"),
                       "dependency:copy-dependencies", f"-DoutputDirectory={staging}", "-DincludeScope=runtime"]
            if not (Path.home() / ".m2" / "settings.xml").exists():
                command[2:2] = ["-s", str(target / "settings.xml")]
            log(f"bench: resolving spark-sql-kafka-0-10_{SCALA}:{connector} with Maven (once)")
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                (target / "failed").write_text((result.stdout + result.stderr)[-3000:])
                return None
            shutil.rmtree(jars, ignore_errors=True)
            staging.rename(jars)
            (target / "complete").write_text(connector)
    return sorted(
        str(path) for path in jars.glob("*.jar")
        if any(path.name.startswith(artifact) for artifact in CONNECTOR_ARTIFACTS)
    )


def connector_jars(wanted: str | None = None, log=print) -> tuple[str, list[str]]:
    """(connector version, jar paths): the installed pyspark's version, else a fallback."""
    import importlib.metadata

    spark_version = importlib.metadata.version("pyspark")
    candidates = [(wanted, wanted)] if wanted else [(spark_version, spark_version), *FALLBACK_VERSIONS]
    tried = []
    for connector, token in candidates:
        jars = _resolve(connector, token, log)
        if jars:
            if connector != spark_version:
                log(f"bench: spark-sql-kafka {spark_version} is not available from Maven; using {connector} "
                    f"(token provider {token}) with Spark {spark_version}")
            return connector, jars
        tried.append(connector)
    raise RuntimeError(f"Maven could not resolve spark-sql-kafka-0-10_{SCALA} (tried {', '.join(tried)}); "
                       f"see {glob.escape(str(Path('~/.cache/kafka-local').expanduser()))}/spark-sql-kafka-*/failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    for name in ("--jars", "--bootstrap", "--input", "--output", "--checkpoint", "--key-field", "--filter",
                 "--progress-file"):
        parser.add_argument(name, required=True)
    parser.add_argument("--trigger-seconds", type=float, default=0.5)
    parser.add_argument("--max-per-trigger", type=int, default=50_000)
    parser.add_argument("--shuffle-partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from ..job import ROCKSDB_PROVIDER
    from ..runner import StopRequested, stop_at_batch_boundary

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(args.master).appName("bench-spark-kafka")
        .config("spark.jars", args.jars)
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.noDataProgressEventInterval", "1000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    progress = record_progress(spark, args.progress_file)
    key = args.key_field
    events = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_per_trigger))
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select(F.from_json(F.col("value").cast("string"), f"`{key}` STRING").alias("event"))
        .select(F.col(f"event.`{key}`").alias(key))
    )
    counts = events.where(F.col(key).isNotNull() & F.expr(args.filter)).groupBy(key).count()
    output = counts.select(
        F.col(key).alias("key"),
        F.to_json(F.struct(F.col(key).alias("key"), F.col("count").alias("count"))).alias("value"),
    )
    query = (
        output.writeStream.format("kafka").outputMode("update")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .start()
    )
    stop = StopRequested()
    stop.install()
    try:
        while not stop.event.is_set() and query.isActive:
            stop.event.wait(0.5)
        if query.isActive:
            stop_at_batch_boundary(query)
        elif query.exception() is not None:
            print(f"query failed: {query.exception()}", file=sys.stderr)
            return 1
    finally:
        spark.stop()
        progress.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
