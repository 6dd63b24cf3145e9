"""A production-shaped listener for local brokers: TLS with SASL/SCRAM-SHA-512 (SASL_SSL), and
Kafka's StandardAuthorizer with `allow.everyone.if.no.acl.found=false`, so that a principal can do
exactly what its ACLs say. The brokers' own PLAINTEXT listeners stay for the tests and the tools,
whose principal (ANONYMOUS) is a super user: they create topics, users and ACLs, and read back.

The certificates are made with the JDK's keytool (the brokers' Java has it): a CA of its own,
its certificate in PEM for the clients (librdkafka's `ssl.ca.location`, which the job also turns
into the Java client's PEM trust store), and a key and certificate for 127.0.0.1 and localhost,
signed by that CA, in a PKCS12 key store each broker reads. Loopback only; the store password is
the local brokers' own, not a secret."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import maven
from .unavailable import KafkaUnavailable

LISTENER = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
STORE_PASSWORD = "local-broker-store"
SCRAM_ITERATIONS = 8192


@dataclass(frozen=True)
class Certificates:
    ca_pem: Path  # for the clients
    keystore: Path  # the brokers' key and certificate, PKCS12


def make_certificates(directory: Path) -> Certificates:
    """The CA and the brokers' key store in `directory`, made once."""
    made = Certificates(directory / "ca.pem", directory / "broker.p12")
    if made.ca_pem.exists() and made.keystore.exists():
        return made
    directory.mkdir(parents=True, exist_ok=True)
    ca_store, request, signed = directory / "ca.p12", directory / "broker.csr", directory / "broker.pem"
    for path in (ca_store, made.keystore):
        path.unlink(missing_ok=True)
    store = ["-storetype", "PKCS12", "-storepass", STORE_PASSWORD, "-keypass", STORE_PASSWORD]
    _keytool(["-genkeypair", "-alias", "ca", "-dname", "CN=local Kafka CA", "-keyalg", "RSA", "-keysize", "2048",
              "-validity", "365", "-ext", "bc:c", "-keystore", str(ca_store), *store])
    _keytool(["-exportcert", "-rfc", "-alias", "ca", "-keystore", str(ca_store), "-file", str(made.ca_pem), *store])
    _keytool(["-genkeypair", "-alias", "broker", "-dname", "CN=localhost", "-keyalg", "RSA", "-keysize", "2048",
              "-validity", "365", "-keystore", str(made.keystore), *store])
    _keytool(["-certreq", "-alias", "broker", "-keystore", str(made.keystore), "-file", str(request), *store])
    _keytool(["-gencert", "-rfc", "-alias", "ca", "-keystore", str(ca_store), "-infile", str(request),
              "-outfile", str(signed), "-validity", "365", "-ext", "SAN=ip:127.0.0.1,dns:localhost", *store])
    _keytool(["-importcert", "-noprompt", "-alias", "ca", "-keystore", str(made.keystore),
              "-file", str(made.ca_pem), *store])
    _keytool(["-importcert", "-alias", "broker", "-keystore", str(made.keystore), "-file", str(signed), *store])
    return made


def broker_properties(certificates: Certificates) -> dict[str, str]:
    """The SASL_SSL listener's settings and the authorizer, for a broker that has that listener."""
    module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    return {
        f"listener.name.{LISTENER.lower()}.sasl.enabled.mechanisms": MECHANISM,
        f"listener.name.{LISTENER.lower()}.{MECHANISM.lower()}.sasl.jaas.config": f"{module} required;",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(certificates.keystore),
        "ssl.keystore.password": STORE_PASSWORD,
        "ssl.key.password": STORE_PASSWORD,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT and controller listeners: the brokers, tests, tools
    }


def client_settings(certificates: Certificates, username: str, password: str) -> dict[str, str]:
    """The `[kafka]` table a job uses to reach the SASL_SSL listener (librdkafka's names)."""
    return {"security.protocol": LISTENER, "sasl.mechanism": MECHANISM, "sasl.username": username,
            "sasl.password": password, "ssl.ca.location": str(certificates.ca_pem)}


def add_users(bootstrap_servers: str, users: Iterable[tuple[str, str]]) -> None:
    """SCRAM credentials for (user, password) pairs, through a super user's listener."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, info, password.encode()) for user, password in users])
    for future in futures.values():
        future.result(timeout=30)


def _keytool(arguments: list[str]) -> None:
    java = Path(maven.require("java", "openjdk-17-jre-headless", KafkaUnavailable, "the local brokers' TLS"))
    keytool = java.resolve().with_name("keytool")
    result = subprocess.run([str(keytool), *arguments], capture_output=True, text=True)
    if result.returncode != 0:
        raise KafkaUnavailable(f"keytool {arguments[0]} failed while making the local brokers' certificates:\n"
                               f"{result.stdout}{result.stderr}")
