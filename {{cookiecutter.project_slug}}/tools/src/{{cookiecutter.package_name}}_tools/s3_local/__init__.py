"""A real S3-compatible server for the tests, started and stopped by them like Kafka: S3Proxy
(Apache-2.0), the S3 API over a local directory through its `filesystem-nio2` backend, which
honours a conditional PUT (`If-None-Match: *` answers 412 when the key exists). Its jars are
resolved with Maven once (maven.py) and it runs with `java` on a free loopback port.

Chosen over MinIO (not installable here with `go install`, untried) and over moto's server (an
emulator); S3Proxy 2.7.0 refused conditional PUT (NotImplemented), 4.0.0 honours it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path

from .. import maven
from ..processes import free_port
from ..starting import BOUND_SECONDS, StartFailed, tree_progress, wait_for_start

S3PROXY_VERSION = "4.0.0"
REGION = "us-east-1"


class S3Unavailable(RuntimeError):
    """The local S3 server could not be started; the message says why."""


class S3Server:
    """One S3Proxy process; its objects live under `workdir/data` and survive a restart."""

    def __init__(self, workdir: Path, access_key: str = "local-access", secret_key: str = "local-secret",
                 jvm_options: str = "") -> None:
        self.workdir = workdir
        self.jvm_options = jvm_options.split()  # e.g. the tests' C1 alone (tests/harness.py)
        self.access_key, self.secret_key, self.region = access_key, secret_key, REGION
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, bound_seconds: float = BOUND_SECONDS) -> float:
        """Start the server and wait until it answers, while it lives and makes progress
        (starting.py); returns the seconds it took."""
        jars = maven.resolve_jars(resources.files(__package__).joinpath("pom.xml").read_bytes(),
                                  f"s3proxy-{S3PROXY_VERSION}", S3Unavailable)
        java = maven.require("java", "openjdk-17-jre-headless", S3Unavailable, "the local S3 server")
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        properties = self.workdir / "s3proxy.conf"
        properties.write_text("\n".join([
            f"s3proxy.endpoint={self.endpoint}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={self.access_key}",
            f"s3proxy.credential={self.secret_key}",
            "jclouds.provider=filesystem-nio2",
            f"jclouds.filesystem.basedir={self.workdir / 'data'}",
        ]) + "\n")
        started = time.monotonic()
        with open(self.workdir / "s3proxy.log", "ab") as log:
            self.process = subprocess.Popen(
                self.command(java, jars, properties),
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        process, log_path = self.process, self.workdir / "s3proxy.log"
        try:
            wait_for_start(f"S3Proxy on {self.endpoint}", self._answers, alive=lambda: process.poll() is None,
                           progress=tree_progress(process.pid, log_path), bound_seconds=bound_seconds)
        except StartFailed as error:
            self.stop()
            raise S3Unavailable(f"{error}; see {log_path}") from None
        return time.monotonic() - started

    def command(self, java: str, jars: Path, properties: Path) -> list[str]:
        return [java, "-Xmx256m", *self.jvm_options, "-Dlogback.configurationFile=/dev/null", "-cp", f"{jars}/*",
                "org.gaul.s3proxy.Main", "--properties", str(properties)]

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(self.endpoint, timeout=1).close()
        except urllib.error.HTTPError:
            return True  # an S3 error document (no credentials): the server is up
        except OSError:
            return False
        return True

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # a restart test wants it gone at once, as in a crash
            self.process.wait()
        self.process = None

    def client(self):
        """A boto3 S3 client for this server."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
                            aws_secret_access_key=self.secret_key, region_name=self.region)
