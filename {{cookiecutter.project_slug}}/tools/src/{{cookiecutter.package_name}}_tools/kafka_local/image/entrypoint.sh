#!/bin/sh
# Kafka (KRaft) configured the way the apache/kafka image is: each KAFKA_FOO_BAR variable
# becomes the property foo.bar ("__" stands for "_", "___" for "-"), so one set of variables
# (containers.kafka_environment) configures both images.
#   entrypoint.sh             format storage if needed, then run the broker
#   entrypoint.sh properties  print the translated properties and exit (for tests)
set -eu
set -f  # no globbing: the classpath wildcard is Java's, and the *_OPTS are split on purpose

DEFAULT_LOG_DIRS=/var/lib/kafka/data
CONFIG=/opt/kafka/server.properties

properties() {
  env | LC_ALL=C sort | while IFS='=' read -r name value; do
    case "$name" in
      # JVM and image settings, not broker properties (the same list apache/kafka skips)
      KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_GC_LOG_OPTS | KAFKA_LOG4J_OPTS \
        | KAFKA_JMX_OPTS | KAFKA_JMX_PORT | KAFKA_JMX_HOSTNAME | KAFKA_VERSION | KAFKA_HOME) ;;
      KAFKA_?*)
        key=$(printf '%s' "${name#KAFKA_}" | tr '[:upper:]' '[:lower:]' \
          | sed -e 's/___/-/g' -e 's/__/#/g' -e 's/_/./g' -e 's/#/_/g')
        printf '%s=%s\n' "$key" "$value" ;;
    esac
  done
  [ -n "${KAFKA_LOG_DIRS:-}" ] || printf 'log.dirs=%s\n' "$DEFAULT_LOG_DIRS"
}

if [ "${1:-}" = properties ]; then
  properties
  exit 0
fi

properties > "$CONFIG"
JAVA_OPTS="${KAFKA_HEAP_OPTS:--Xmx512m -Xms128m} ${KAFKA_OPTS:-} -Dlog4j2.configurationFile=/opt/kafka/log4j2.yaml"
log_dir=$(sed -n 's/^log\.dirs=//p' "$CONFIG" | cut -d, -f1)
if [ ! -f "$log_dir/meta.properties" ]; then
  # A static quorum (controller.quorum.voters) is formatted as is; a dynamic one needs --standalone.
  standalone=--standalone
  if grep -q '^controller\.quorum\.voters=' "$CONFIG"; then standalone=; fi
  # The same default id as apache/kafka when CLUSTER_ID is not given.
  java $JAVA_OPTS -cp /opt/kafka/libs/* kafka.tools.StorageTool format --ignore-formatted \
    --cluster-id="${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" -c "$CONFIG" $standalone  # "=": ids may start with "-"
fi
exec java $JAVA_OPTS -cp /opt/kafka/libs/* kafka.Kafka "$CONFIG"
