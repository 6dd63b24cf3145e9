"""The `[kafka]` table in the Java client's names, for Spark's Kafka source: the table is written
in librdkafka's names (confluent-kafka, every other client of the job); configuration checks
build this form once too, so that a table it cannot translate fails at start-up."""

from __future__ import annotations

from collections.abc import Mapping

# The SASL mechanisms whose JAAS line the job writes from librdkafka's user and password.
_SASL_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# librdkafka settings the Java client spells differently or does not have.
_LIBRDKAFKA_ONLY = {"sasl.username", "sasl.password", "sasl.mechanisms", "ssl.ca.location"}


def java_client_options(settings: Mapping[str, str]) -> dict[str, str]:
    """The same settings as options of Spark's Kafka source: `kafka.`-prefixed, with librdkafka's
    SASL user and password turned into the Java client's JAAS line and a CA file into a PEM trust store."""
    java = {name: value for name, value in settings.items() if name not in _LIBRDKAFKA_ONLY}
    mechanism = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
    if mechanism:
        java["sasl.mechanism"] = mechanism
    if "sasl.username" in settings and "sasl.jaas.config" not in settings:
        module = _SASL_LOGIN_MODULES.get((mechanism or "PLAIN").upper())
        if module is None:
            raise ValueError(f"sasl.mechanism {mechanism!r}: give the Java client's sasl.jaas.config in [kafka]")
        user, password = (_jaas_quoted(settings.get(n, "")) for n in ("sasl.username", "sasl.password"))
        java["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    if "ssl.ca.location" in settings and "ssl.truststore.location" not in settings:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = settings["ssl.ca.location"]
    return {f"kafka.{name}": value for name, value in java.items()}


def _jaas_quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
