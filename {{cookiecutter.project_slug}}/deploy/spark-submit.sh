#!/usr/bin/env bash
# Run the job through spark-submit: the same as `{{ cookiecutter.package_name }} run`, on any Spark master.
#
#   deploy/spark-submit.sh                       # arguments default to: run; job.toml says the rest
#   deploy/spark-submit.sh run --config prod.toml --set trigger_interval_seconds=5
#   SPARK_MASTER=yarn deploy/spark-submit.sh     # the master for this submission (else spark_master)
#   CHECKPOINT_LOCATION=s3a://bucket/counts SPARK_SUBMIT_ARGS="--executor-memory 2g" deploy/spark-submit.sh
#   HADOOP_AWS_CLASSPATH=/opt/jars/hadoop-aws.jar:/opt/jars/bundle.jar ...   # S3A jars already on the nodes
#
# The master and the checkpoint are the job's own: `spark_master` and `checkpoint_location` as the
# job file, the environment and the arguments resolve them (deploy/resolve.py). SPARK_MASTER and
# CHECKPOINT_LOCATION, when set, override both for the submission and for the job alike; unset,
# nothing here outranks the job file.
#
# Spark itself is the installed pyspark (pyproject.toml pins it); Kafka is read by Spark's own
# connector, of the same Spark version, which spark-submit resolves with --packages (through the
# job's conf/ivysettings.xml) and ships to the executors. The job's settings come from job.toml, the
# {{ cookiecutter.package_name | upper }}_<OPTION> environment variables and --set flags, as for `{{ cookiecutter.package_name }} run`.
#
# Executors run Python: the exactly-once sink's publishing tasks (phase 2, one per commit shard),
# the at-least-once sink and the state TTL's count. Every node needs Python 3.11+ with this
# project's dependencies (the same image everywhere, or a venv packed with venv-pack and shipped
# with --archives).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
SPARK_HOME=${SPARK_HOME:-$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}
CONF_DIR=src/{{ cookiecutter.package_name }}/conf
read -r PACKAGES AVRO_PACKAGE PROTOBUF_JAVA < <(PYTHONPATH=src "$PYTHON" -c 'from {{ cookiecutter.package_name }}.spark.session import KAFKA_CONNECTOR, AVRO_PACKAGE; from {{ cookiecutter.package_name }}.formats.protobuf_jar import PROTOBUF_JAVA; print(KAFKA_CONNECTOR, AVRO_PACKAGE, PROTOBUF_JAVA)')

ARGS=("${@:-run}")
# What the operator set for this submission reaches the job as its own options (they outrank the
# job file, as any {{ cookiecutter.package_name | upper }}_<OPTION> does); then the job resolves both, and a bad option
# ends here in the job's one line, before spark-submit starts.
if [[ -n "${SPARK_MASTER:-}" ]]; then export {{ cookiecutter.package_name | upper }}_SPARK_MASTER="$SPARK_MASTER"; fi
if [[ -n "${CHECKPOINT_LOCATION:-}" ]]; then export {{ cookiecutter.package_name | upper }}_CHECKPOINT_LOCATION="$CHECKPOINT_LOCATION"; fi
RESOLVED=$(PYTHONPATH=src "$PYTHON" deploy/resolve.py "${ARGS[@]}")
SPARK_MASTER=$(sed -n 1p <<< "$RESOLVED")
# The checkpoint (offsets, state, the sink's commit log) must outlive any one machine: in a
# cluster put it on shared storage every driver attempt can reach (hdfs://, s3a://, gs://,
# abfss://). A local path is only right for a single-machine run.
CHECKPOINT_LOCATION=$(sed -n 2p <<< "$RESOLVED")
# Avro values (input_format or output_format avro): spark-avro, of the same Spark version.
# Protobuf values: protobuf-java, and the job's codec (formats/protobuf_codec/), shipped with --jars.
FORMATS=$(sed -n 3p <<< "$RESOLVED")
if [[ " $FORMATS " == *" avro "* ]]; then PACKAGES+=",$AVRO_PACKAGE"; fi
EXTRA_CONF=()
if [[ " $FORMATS " == *" protobuf "* ]]; then
  PACKAGES+=",$PROTOBUF_JAVA"
  EXTRA_CONF+=(--jars "$(sed -n 4p <<< "$RESOLVED")")
fi
case "$CHECKPOINT_LOCATION" in
  s3:*|s3a:*)
    # S3 through Hadoop's S3A connector, of the same Hadoop version as Spark's own jars; the job
    # gives S3A the [s3] table's settings, else the AWS default chain applies (environment,
    # profile, instance or pod role).
    # HADOOP_AWS_CLASSPATH: hadoop-aws and its AWS SDK bundle already on every node (baked into
    # the image): put on the class path instead of shipped with --packages, which copies the
    # SDK bundle (~700 MB) to every executor of every submission.
    if [[ -n "${HADOOP_AWS_CLASSPATH:-}" ]]; then
      EXTRA_CONF+=(--conf "spark.driver.extraClassPath=$HADOOP_AWS_CLASSPATH"
                   --conf "spark.executor.extraClassPath=$HADOOP_AWS_CLASSPATH")
    else
      HADOOP_VERSION=$(find "$SPARK_HOME/jars" -name 'hadoop-client-api-*.jar' -printf '%f\n' | sed -n 's/^hadoop-client-api-\(.*\)\.jar$/\1/p')
      PACKAGES+=",org.apache.hadoop:hadoop-aws:${HADOOP_VERSION}"
    fi
    EXTRA_CONF+=(--conf spark.hadoop.fs.s3.impl=org.apache.hadoop.fs.s3a.S3AFileSystem)
    ;;
esac
# More spark-submit options, e.g. SPARK_SUBMIT_ARGS="--executor-memory 2g --total-executor-cores 4".
read -r -a USER_ARGS <<< "${SPARK_SUBMIT_ARGS:-}"

# The job's package, shipped to the executors (the development tools are a package of their own, under tools/).
mkdir -p build/deploy
"$PYTHON" - build/deploy/{{ cookiecutter.package_name }}.zip src {{ cookiecutter.package_name }} <<'PY'
import pathlib, sys, zipfile
out, root, package = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
    for path in sorted((root / package).rglob("*")):
        parts = path.relative_to(root).parts
        if path.is_file() and "__pycache__" not in parts:
            archive.write(path, path.relative_to(root))
PY

# RocksDB keeps the per-key counts off the JVM heap; changelog checkpointing makes each
# micro-batch's state commit small (the job sets both too; here they show in the submission).
exec "$SPARK_HOME/bin/spark-submit" \
  --master "$SPARK_MASTER" \
  --name {{ cookiecutter.project_slug }} \
  --py-files build/deploy/{{ cookiecutter.package_name }}.zip \
  --packages "$PACKAGES" \
  --conf spark.jars.ivySettings="$CONF_DIR/ivysettings.xml" \
  --driver-java-options "-Dlog4j2.configurationFile=file://$PWD/$CONF_DIR/log4j2.properties" \
  --conf spark.sql.streaming.stateStore.providerClass=org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider \
  --conf spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true \
  --conf spark.pyspark.python="$PYTHON" \
  "${EXTRA_CONF[@]}" \
  "${USER_ARGS[@]}" \
  deploy/main.py "${ARGS[@]}"
