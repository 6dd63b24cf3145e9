"""The job's container image (deploy/image/Dockerfile), built by `make image` with the container
engine the Kafka fixture would use, for a test to run the job in it as Kubernetes runs its driver."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .kafka_local.engine import Log, container_engine, engine_command
from .kafka_local.image import ensure_base_image, registry_reachable
from .kafka_local.unavailable import KafkaUnavailable

BASE_ARGUMENT = re.compile(r"^ARG BASE_IMAGE=(\S+)", re.MULTILINE)


class ImageUnavailable(Exception):
    """The image could not be built; the message says why and where the build's output is."""


@dataclass(frozen=True)
class JobImage:
    engine: str  # the command line client: podman or docker
    tag: str

    def command(self, *arguments: str) -> list[str]:
        return [self.engine, *arguments]


@contextmanager
def job_image(project: Path, tag: str, log_path: Path, log: Log = print) -> Iterator[JobImage]:
    """Build the project's image as `tag` (removed afterwards). Where no registry gives the
    Dockerfile's base, the base is the local Debian bookworm one the Kafka image is built on."""
    try:
        with container_engine(log):
            engine = engine_command()
            default = dockerfile_base(project)
            base = default if registry_reachable(default) else ensure_base_image(log)
            started = time.monotonic()
            with open(log_path, "w") as build_log:
                built = subprocess.run(["make", "image", f"IMAGE={tag}", f"ENGINE={engine}", f"BASE_IMAGE={base}"],
                                       cwd=project, stdout=build_log, stderr=subprocess.STDOUT)
            if built.returncode != 0:
                raise ImageUnavailable(f"make image failed (exit {built.returncode}); its output: {log_path}")
            log(f"image: {tag} built on {base} with {engine} in {time.monotonic() - started:.0f}s")
            try:
                yield JobImage(engine, tag)
            finally:
                subprocess.run([engine, "rmi", "--force", tag], capture_output=True)
    except KafkaUnavailable as error:  # no container engine, or no base image for it
        raise ImageUnavailable(str(error)) from error


def dockerfile_base(project: Path) -> str:
    """The base image deploy/image/Dockerfile names by default (its `ARG BASE_IMAGE=`)."""
    dockerfile = project / "deploy" / "image" / "Dockerfile"
    if (found := BASE_ARGUMENT.search(dockerfile.read_text())) is None:
        raise ImageUnavailable(f"{dockerfile} has no `ARG BASE_IMAGE=<image>` line")
    return found[1]
