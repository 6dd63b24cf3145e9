#!/bin/bash
# The image's entry point. Spark on Kubernetes starts its pods with a first argument of `driver`
# or `executor` and describes the rest in SPARK_* variables (Spark's "running on Kubernetes"
# guide, custom images); any other command runs as given, e.g. the probe's
# `python3 -m {{ cookiecutter.package_name }} status --config /etc/{{ cookiecutter.project_slug }}/job.toml --check ...`.
set -euo pipefail

# Spark's configuration directory (mounted by Spark at SPARK_CONF_DIR), then Spark's own jars.
classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}:${SPARK_CLASSPATH:-}:$SPARK_HOME/jars/*"

case "${1:-}" in
  driver)
    shift
    # The driver runs in client mode inside its pod; the executors reach it at the pod's address.
    exec /usr/bin/tini -s -- "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:-0.0.0.0}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS:-}" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    # The driver passes the executor's JVM options as SPARK_JAVA_OPT_0, _1, ... in that order.
    # The job's log4j2 settings first: an option of the driver's for the same property comes later and wins.
    read -r -a java_options <<< "${SPARK_SUBMIT_OPTS:-}"
    while IFS= read -r name; do
      java_options+=("${!name}")
    done < <(compgen -e | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n)
    exec /usr/bin/tini -s -- java "${java_options[@]}" \
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" -cp "$classpath" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
      --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  *)
    exec "$@"
    ;;
esac
