"""The Kafka image testcontainers runs: the official one when it can be pulled, otherwise one
built locally (no registry needed) from Debian's packages and Kafka's jars resolved with Maven.

The local image is tagged with a hash of its recipe and the Kafka version, and is built only
when that tag does not exist yet.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from .engine import Log, apt_install
from .process import KAFKA_VERSION, _resource, cache_root, resolve_jars
from .unavailable import KafkaUnavailable

OFFICIAL_IMAGE = os.environ.get("KAFKA_IMAGE") or f"apache/kafka:{KAFKA_VERSION}"
BASE_IMAGE = "localhost/debian-jre17:bookworm-1"  # bump the suffix to rebuild the base
LOCAL_REPOSITORY = "localhost/kafka-kraft"
RECIPE = ("Containerfile", "entrypoint.sh", "log4j2.yaml")


def _recipe_file(name: str) -> bytes:
    return resources.files(__package__).joinpath("image", name).read_bytes()


def recipe_hash() -> str:
    """A hash of everything the local image is made from; a change gives a new tag."""
    digest = hashlib.sha256(f"{KAFKA_VERSION}\n{BASE_IMAGE}\n".encode())
    for name in RECIPE:
        digest.update(name.encode() + b"\0" + _recipe_file(name) + b"\0")
    digest.update(_resource("pom.xml"))
    return digest.hexdigest()[:12]


def local_image() -> str:
    return f"{LOCAL_REPOSITORY}:{KAFKA_VERSION}-{recipe_hash()}"


def _client(timeout: int = 900) -> Any:
    import docker

    return docker.from_env(timeout=timeout)


def _exists(client: Any, image: str) -> bool:
    import docker.errors

    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        return False


def registry_reachable(image: str, timeout: float = 3.0) -> bool:
    """A fast check that the image's registry answers, so an offline pull does not hang or retry."""
    first = image.split("/", 1)[0]
    host = first if "/" in image and ("." in first or ":" in first) else "registry-1.docker.io"
    name, _, port = host.partition(":")
    try:
        socket.create_connection((name, int(port or 443)), timeout=timeout).close()
        return True
    except OSError:
        return False


def ensure_kafka_image(log: Log = print) -> str:
    """Return the name of a usable Kafka image, pulling or building it when missing."""
    import docker.errors

    client = _client()
    try:
        if _exists(client, OFFICIAL_IMAGE):
            return OFFICIAL_IMAGE
        if registry_reachable(OFFICIAL_IMAGE):
            try:
                log(f"kafka: pulling {OFFICIAL_IMAGE}")
                client.images.pull(OFFICIAL_IMAGE)
                return OFFICIAL_IMAGE
            except docker.errors.APIError as error:
                log(f"kafka: cannot pull {OFFICIAL_IMAGE} ({error}); building a local image")
        tag = local_image()
        if _exists(client, tag):
            return tag
        with _image_lock():
            if not _exists(client, BASE_IMAGE):
                _build_base(client, log)
            if not _exists(client, tag):
                _build_kafka(client, tag, log)
        return tag
    finally:
        client.close()


def ensure_base_image(log: Log = print) -> str:
    """The local Debian bookworm base with Java 17 (built once, as for the Kafka image); another
    local image may start from it, e.g. the job's own (deploy/image/Dockerfile) where no registry
    gives debian:bookworm-slim."""
    client = _client()
    try:
        with _image_lock():
            if not _exists(client, BASE_IMAGE):
                _build_base(client, log)
        return BASE_IMAGE
    finally:
        client.close()


@contextlib.contextmanager
def _image_lock() -> Iterator[None]:
    """Concurrent first sessions wait for one build instead of racing."""
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / "image.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build_base(client: Any, log: Log) -> None:
    """Debian bookworm with Java 17, from Debian's packages: no registry involved."""
    if shutil.which("debootstrap") is None:
        apt_install(["debootstrap"], log)
    started = time.monotonic()
    log(f"kafka: building base image {BASE_IMAGE} with debootstrap (once, about a minute or two)")
    with tempfile.TemporaryDirectory(prefix="kafka-base-", dir=cache_root()) as scratch:
        rootfs = Path(scratch) / "rootfs"
        result = subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=openjdk-17-jre-headless", "bookworm", str(rootfs)],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise KafkaUnavailable(f"debootstrap failed:\n{(result.stdout + result.stderr)[-3000:]}")
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):  # not needed at run time
            for entry in (rootfs / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        archive = Path(scratch) / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(rootfs, arcname=".")
        # The tag goes inside the repository name: Podman's API ignores a separate tag.
        client.api.import_image_from_file(str(archive), repository=BASE_IMAGE)
    if not _exists(client, BASE_IMAGE):
        raise KafkaUnavailable(f"importing the base image {BASE_IMAGE} failed")
    log(f"kafka: base image {BASE_IMAGE} built in {time.monotonic() - started:.1f}s")


def _build_kafka(client: Any, tag: str, log: Log) -> None:
    jars = resolve_jars(log)
    started = time.monotonic()
    log(f"kafka: building image {tag} (Kafka {KAFKA_VERSION} jars + entrypoint on {BASE_IMAGE})")
    with tempfile.TemporaryDirectory(prefix="kafka-image-", dir=cache_root()) as context:
        shutil.copytree(jars, Path(context) / "jars")
        for name in RECIPE:
            (Path(context) / name).write_bytes(_recipe_file(name))
        import docker.errors

        try:
            client.images.build(
                path=context, dockerfile="Containerfile", tag=tag, buildargs={"BASE": BASE_IMAGE},
                rm=True, pull=False,
            )
        except docker.errors.BuildError as error:
            lines = "".join(str(entry.get("stream", entry)) for entry in error.build_log)
            raise KafkaUnavailable(f"building {tag} failed: {error}\n{lines[-3000:]}") from error
    log(f"kafka: image {tag} built in {time.monotonic() - started:.1f}s")
