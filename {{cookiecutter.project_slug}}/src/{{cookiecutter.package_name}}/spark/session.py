"""The Spark session the job runs in: Spark's Kafka connector resolved the Spark way
(`spark.jars.packages`, cached by Ivy) once and then taken from the class path (resolved_jars.py),
RocksDB state, quiet logs, a driver JVM that compiles with C1 (QUICK_JIT), and the master that
`spark-submit` was given, if any."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import SparkSession

from ..storage.files import resolve_location
from . import class_archive
from .resolved_jars import RESOLUTION_SETTINGS, ResolvedJars

SCALA_VERSION = "2.13"
# The connector is pinned to the PySpark version: the two are one release of Spark. PySpark is
# 4.2.0, the newest release of spark-sql-kafka-0-10 that the package repository resolves;
# tests/unit/test_session.py checks that the two agree.
SPARK_VERSION = "4.2.0"
KAFKA_CONNECTOR = f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_VERSION}:{SPARK_VERSION}"
# Avro values (formats/): spark-avro's from_avro and to_avro; Avro itself is in PySpark's jars.
AVRO_PACKAGE = f"org.apache.spark:spark-avro_{SCALA_VERSION}:{SPARK_VERSION}"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CONF_DIR = Path(__file__).parent.parent / "conf"  # the package's conf/
IVY_SETTINGS = CONF_DIR / "ivysettings.xml"
LOG4J2_CONFIG = CONF_DIR / "log4j2.properties"
LOG4J2_JSON_LAYOUT = CONF_DIR / "log4j2-json.properties"  # log_format = "json": over LOG4J2_CONFIG
ARROW_MAX_BYTES_PER_BATCH = 16 * 1024 * 1024
# A checkpoint on the local disk through Spark's FileSystem-based checkpoint manager. Without
# Hadoop's native library (pip's PySpark has none), the default FileContext-based one forks
# `chmod` and `readlink` ten times per file it writes (its atomic rename stats the link), for
# every offset, commit and state changelog file of every batch. The FileSystem API renames with
# one rename(2), which is atomic on a local disk, and forks `chmod` twice (the file, its .crc).
# Hadoop's raw local filesystem would save those too, but RocksDB's snapshot upload needs the
# checksummed one (FileSystem.getLocal casts to it).
LOCAL_CHECKPOINT_CONF = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
}

# The driver JVM (in local mode the executor too) compiles with C1 alone. On a small host, C2's
# compilations take most of a core during the JVM's first seconds, which a start waits for, and
# C1's code keeps up with C2's on this job: its throughput about the same, its start-up shorter
# (measured with and without this option by
# `{{ cookiecutter.project_slug }}-tools bench --contenders eos --events 5000000`).
# A job's [spark] table overrides it: its spark.driver.extraJavaOptions come after the job's own.
QUICK_JIT = "-XX:TieredStopAtLevel=1"

# The progress reports a query keeps. The runner reads them all when several batches ended
# between two of its polls (progress_reports.py), and each costs the driver a conversion: Spark's
# 100 would cost it a noticeable share of its time under a backlog. 20 cover batches down to 50 ms.
PROGRESS_REPORTS_CONF = {"spark.sql.streaming.numRecentProgressUpdates": "20"}


def launched_by_spark_submit() -> bool:
    """`spark-submit app.py` starts the JVM first and hands Python its gateway: then the master,
    the packages and the JVM options are spark-submit's, and the job must not override them."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


@contextlib.contextmanager
def jvm_ignores_sigterm() -> Iterator[None]:
    """While PySpark starts its JVM, SIGTERM is ignored, and the JVM inherits that (PySpark has it
    ignore SIGINT the same way): a JVM started with a shutdown signal ignored leaves it ignored. A
    SIGTERM to the job's whole process group (systemd's default KillMode, a container runtime, a
    terminal) then reaches the Python driver alone, which stops at a batch boundary and stops the
    JVM itself. A SIGTERM during those seconds of start-up is lost: an orchestrator's follow-up
    SIGKILL is safe (the sink's guarantee holds through any kill). Afterwards the driver's own
    handlers are back for both signals: PySpark's context takes SIGINT for itself (it cancels the
    jobs and raises KeyboardInterrupt), which would override the runner's stop at a batch boundary."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread sets handlers
        yield
        return
    previous_interrupt = signal.getsignal(signal.SIGINT)
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if previous_interrupt is not None:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGINT, previous_interrupt)


def installed_spark_version() -> str:
    return importlib.metadata.version("pyspark")


def spark_session(app_name: str, master: str, shuffle_partitions: int, ui_port: int = 0,
                  conf: dict[str, str] | None = None, packages: tuple[str, ...] = (), json_logs: bool = False,
                  write_class_archive: bool = False, jars: tuple[str, ...] = ()) -> SparkSession:
    """`conf` and `packages` add to the job's own (e.g. S3A for a checkpoint on S3), `jars` (files:
    the Protobuf codec) beside them; `ui_port` 0
    keeps the UI and Spark's metrics endpoint off; `json_logs` has the JVM log JSON lines in Spark's
    structured-logging layout (under spark-submit, its own log4j2 configuration decides);
    `write_class_archive`: without a class archive, this start's JVM writes one (stop it with `stop`)."""
    # Python workers must run the interpreter that has this package (in local mode, this one).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    for name, value in {**ui_conf(app_name, ui_port), **PROGRESS_REPORTS_CONF, **(conf or {})}.items():
        builder = builder.config(name, value)
    with contextlib.ExitStack() as held:
        resolving = None
        if not launched_by_spark_submit():
            builder, resolving = _launch(builder, master, conf or {}, packages, json_logs, write_class_archive, held,
                                         jars)
        with jvm_ignores_sigterm():
            spark = (
                builder
                # Fixed by the checkpoint once the query has run; the default 200 costs seconds per batch.
                .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
                .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
                .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
                .config("spark.log.structuredLogging.enabled", str(json_logs).lower())
                .config("spark.ui.showConsoleProgress", "false")  # the runner logs one line per batch instead
                # Report idle triggers every second, so the runner sees promptly when the input is drained.
                .config("spark.sql.streaming.noDataProgressEventInterval", "1000")
                .config("spark.sql.session.timeZone", "UTC")
                .config("spark.sql.adaptive.enabled", "false")  # not used by streaming queries; saves two warnings
                # No speculative copies, whatever the submission asks: a copy of a publishing task would
                # fence the task it copies, and a fenced shard stops the job (sink/publishing_tasks.py).
                .config("spark.speculation", "false")
                # Arrow batches to the sink tasks: at most 10,000 rows (Spark's default) and at most 16 MiB,
                # so a batch of large dead letters (64 KiB of raw value each) cannot take 800 MB at once.
                .config("spark.sql.execution.arrow.maxBytesPerBatch", str(ARROW_MAX_BYTES_PER_BATCH))
                .getOrCreate()
            )
        if resolving is not None:
            # What Ivy resolved, without the job's own jars: with those in spark.jars, Spark lists the
            # resolved ones beside them in spark.repl.local.jars alone.
            spark_conf, own = spark.sparkContext.getConf(), {Path(jar).name for jar in jars}
            resolved = spark_conf.get("spark.repl.local.jars" if jars else "spark.jars", "") or ""
            resolving.remember(",".join(uri for uri in resolved.split(",") if uri.rsplit("/", 1)[-1] not in own))
    spark.sparkContext.setLogLevel("WARN")
    return spark


def _launch(builder: SparkSession.Builder, master: str, conf: dict[str, str], packages: tuple[str, ...],
            json_logs: bool, write_class_archive: bool, held: contextlib.ExitStack, local_jars: tuple[str, ...] = ()
            ) -> tuple[SparkSession.Builder, ResolvedJars | None]:
    """What the JVM this process starts needs: the master, log4j2, the JIT, the connector's jars
    (once known, on the driver's class path in local mode, else in spark.jars; else resolved by
    Ivy, one start at a time on the host, the lock kept in `held`: Ivy's cache is not safe for
    concurrent resolutions), the class archive. Returns the builder and, for a start that
    resolves, what to remember once it did."""
    log4j_files = (LOG4J2_CONFIG, LOG4J2_JSON_LAYOUT) if json_logs else (LOG4J2_CONFIG,)
    log4j = f"-Dlog4j2.configurationFile={','.join(path.as_uri() for path in log4j_files)}"
    builder = builder.master(master).config("spark.executor.extraJavaOptions",
                                            jvm_options(log4j, conf.get("spark.executor.extraJavaOptions")))
    wanted = (KAFKA_CONNECTOR, *packages)
    # The job's [spark] table may take the resolution over (a mirror, another Ivy cache).
    jars = None if RESOLUTION_SETTINGS & set(conf) else ResolvedJars(wanted, IVY_SETTINGS)
    known = None if jars is None else (jars.known() or held.enter_context(jars.resolution()))
    resolving = None
    if known:
        if master.startswith("local"):
            # The executors are this JVM: the jars go on its class path, not to its executors
            # (spark.jars: fetched and copied at every start, loaded by a class loader of their
            # own), and their classes go into the archive with Spark's.
            class_path = [*known, *local_jars]
            builder = builder.config("spark.driver.extraClassPath", os.pathsep.join(class_path))
        else:
            builder = builder.config("spark.jars", ",".join(Path(jar).as_uri() for jar in (*known, *local_jars)))
            class_path = []
        # With the class path settled, the driver's classes can come from an archive.
        archive = class_archive.java_options(class_path, write_class_archive)
    else:
        resolving, archive = jars, ""
        builder = (builder.config("spark.jars.packages", ",".join(wanted))
                   .config("spark.jars.ivySettings", str(IVY_SETTINGS)))
        if local_jars:
            builder = builder.config("spark.jars", ",".join(Path(jar).as_uri() for jar in local_jars))
    driver = jvm_options(log4j, QUICK_JIT, archive, conf.get("spark.driver.extraJavaOptions"))
    return builder.config("spark.driver.extraJavaOptions", driver), resolving


def jvm_options(*parts: str | None) -> str:
    """JVM options in order, the last of a repeated option winning (the JVM's rule): the job's
    first, then a [spark] table's."""
    return " ".join(part.strip() for part in parts if part and part.strip())


def stop(spark: SparkSession) -> None:
    """Stop the session; if its JVM was to write the class archive, wait while it does."""
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", "")
    gateway = getattr(spark.sparkContext._gateway, "proc", None)  # None under spark-submit
    spark.stop()
    class_archive.finish(options, gateway)


def checkpoint_conf(location: str) -> dict[str, str]:
    """What a checkpoint at `location` (a path or URI) needs of the session: LOCAL_CHECKPOINT_CONF
    for one on the local disk; nothing for shared storage (HDFS, S3A keep Spark's defaults)."""
    return dict(LOCAL_CHECKPOINT_CONF) if resolve_location(location).startswith("file:") else {}


def ui_conf(app_name: str, port: int) -> dict[str, str]:
    """The Spark UI on `port` (0: off), with the streaming queries' metrics in Spark's metrics
    system and its Prometheus servlet at /metrics/prometheus (the executors' at
    /metrics/executors/prometheus). The namespace is the app name, not the app id, so that the
    series keep their names across restarts."""
    if port == 0:
        return {"spark.ui.enabled": "false"}
    return {
        "spark.ui.enabled": "true",
        "spark.ui.port": str(port),
        "spark.ui.prometheus.enabled": "true",
        "spark.sql.streaming.metricsEnabled": "true",
        "spark.metrics.namespace": app_name,
        "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
        "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    }
