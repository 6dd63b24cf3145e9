"""A SASL_PLAINTEXT listener on every test broker, beside the PLAINTEXT one, so the tests can
show the job's `[kafka]` client settings working end to end. Loopback only; the user and
password are the test broker's own, not a secret."""

from __future__ import annotations

SASL_USERNAME = "counts-job"
SASL_PASSWORD = "test-broker-password"
LISTENER = "SASL_PLAINTEXT"


def broker_properties() -> dict[str, str]:
    """Broker properties enabling SASL/PLAIN with one user on the listener named SASL_PLAINTEXT."""
    module = "org.apache.kafka.common.security.plain.PlainLoginModule"
    return {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'{module} required user_{SASL_USERNAME}="{SASL_PASSWORD}";',
    }


def client_settings() -> dict[str, str]:
    """The `[kafka]` table a job uses to reach the SASL listener (librdkafka's names)."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": SASL_USERNAME, "sasl.password": SASL_PASSWORD}
