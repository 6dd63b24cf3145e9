"""The Spark session's fixed parts: the connector matches PySpark, spark-submit's master wins."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ElementTree

from {{ cookiecutter.package_name }}.spark import session


def test_the_kafka_connector_is_the_installed_sparks_own_version():
    assert session.installed_spark_version() == session.SPARK_VERSION
    assert session.KAFKA_CONNECTOR.endswith(f"_{session.SCALA_VERSION}:{session.installed_spark_version()}")


def test_the_shipped_spark_configuration_files_parse():
    resolvers = ElementTree.parse(session.IVY_SETTINGS).getroot().find("resolvers")
    assert [r.tag for r in resolvers] == ["ibiblio"]  # Maven Central only: no ~/.m2 trap
    assert "rootLogger.level = warn" in session.LOG4J2_CONFIG.read_text()


def test_the_driver_jvm_compiles_with_c1_unless_the_spark_table_says_otherwise(spark):
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions", "").split()
    assert session.QUICK_JIT in options
    assert session.jvm_options("-Dx=1", session.QUICK_JIT, "", " -XX:TieredStopAtLevel=4 ").split() == [
        "-Dx=1", session.QUICK_JIT, "-XX:TieredStopAtLevel=4"]  # the JVM takes the last one given
    assert session.jvm_options("-Dx=1", None) == "-Dx=1"


def test_a_master_given_by_spark_submit_is_not_overridden(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert not session.launched_by_spark_submit()
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "41234")  # what spark-submit hands a Python app
    assert session.launched_by_spark_submit()


def test_spark_submit_runs_the_job_on_the_master_it_was_given(tmp_path):
    """A real spark-submit with --master local[1]: the job's session keeps it (the config says local[2])."""
    import os

    from pyspark.find_spark_home import _find_spark_home

    app = tmp_path / "app.py"
    app.write_text(
        "from {{ cookiecutter.package_name }}.spark.session import spark_session\n"
        "spark = spark_session('master-check', 'local[2]', 1)\n"
        "print('MASTER=' + spark.sparkContext.master)\n"
        "spark.stop()\n"
    )
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(
        [f"{_find_spark_home()}/bin/spark-submit", "--master", "local[1]", str(app)],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert "MASTER=local[1]" in result.stdout, result.stderr[-2000:]


def test_arrow_batches_to_the_sink_are_bounded_by_bytes(spark):
    from {{ cookiecutter.package_name }}.spark.session import ARROW_MAX_BYTES_PER_BATCH

    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch") == str(ARROW_MAX_BYTES_PER_BATCH)


def test_a_query_keeps_the_progress_reports_the_runner_reads(spark):
    """progress_reports.py reads every kept report when batches ended between two polls."""
    assert spark.conf.get("spark.sql.streaming.numRecentProgressUpdates") == "20"


def test_the_ui_brings_sparks_prometheus_endpoint_and_port_zero_keeps_both_off():
    on = session.ui_conf("color-job", 4050)
    assert on["spark.ui.enabled"] == "true" and on["spark.ui.port"] == "4050"
    assert on["spark.sql.streaming.metricsEnabled"] == "true"
    assert on["spark.metrics.conf.*.sink.prometheusServlet.path"] == "/metrics/prometheus"
    assert on["spark.metrics.namespace"] == "color-job"  # stable series names, not the app id
    assert session.ui_conf("color-job", 0) == {"spark.ui.enabled": "false"}


def test_a_local_checkpoint_gets_the_filesystem_based_manager_and_shared_storage_keeps_sparks_default():
    for location in ("file:///var/lib/job/checkpoints", "checkpoints", "/var/lib/job/checkpoints"):
        assert session.checkpoint_conf(location) == session.LOCAL_CHECKPOINT_CONF
    for location in ("s3a://bucket/checkpoints", "hdfs://namenode/checkpoints"):
        assert session.checkpoint_conf(location) == {}


def test_the_local_checkpoint_manager_exists_in_this_spark(spark):
    """A Spark upgrade that moves the class fails here, not in the job's first batch."""
    spark._jvm.java.lang.Class.forName(session.LOCAL_CHECKPOINT_CONF["spark.sql.streaming.checkpointFileManagerClass"])


def test_the_jobs_session_takes_the_checkpoints_settings_under_the_users_spark_table(monkeypatch, tmp_path):
    from {{ cookiecutter.package_name }} import job
    from {{ cookiecutter.package_name }}.config import load_config

    given = {}
    monkeypatch.setattr(job, "new_session", lambda *args, **kwargs: given.update(conf=args[4]))
    job.spark_session(load_config(None, {"checkpoint_location": str(tmp_path)}, environ={}))
    assert given["conf"] == session.LOCAL_CHECKPOINT_CONF
    manager = "spark.sql.streaming.checkpointFileManagerClass"
    theirs = {"checkpoint_location": str(tmp_path), manager: "com.example.Theirs"}
    job.spark_session(load_config(None, theirs, environ={}))
    assert given["conf"][manager] == "com.example.Theirs"


def test_the_jvm_ignores_sigterm_and_sigint_so_a_signal_to_the_whole_group_reaches_the_driver_alone(spark):
    """The driver stops at a batch boundary and stops the JVM itself; a JVM that took the group's
    SIGTERM would die under it (session.jvm_ignores_sigterm)."""
    import signal
    from pathlib import Path

    gateway = spark.sparkContext._gateway.proc  # the JVM PySpark started for this process
    ignored = int(next(line.split()[1] for line in Path(f"/proc/{gateway.pid}/status").read_text().splitlines()
                       if line.startswith("SigIgn:")), 16)
    assert ignored & (1 << (signal.SIGTERM - 1)) and ignored & (1 << (signal.SIGINT - 1)), f"SigIgn {ignored:x}"
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN, "the driver's own SIGTERM handling is back"
