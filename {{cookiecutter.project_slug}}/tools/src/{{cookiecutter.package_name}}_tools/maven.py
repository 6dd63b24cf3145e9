"""Java programs the tools start (the Kafka broker, the S3 server) come as jars that Maven
resolves once from a POM shipped with the package, into a cache outside the repository."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_root() -> Path:
    """Where resolved jars are kept: $KAFKA_LOCAL_CACHE, else the user's cache directory."""
    if configured := os.environ.get("KAFKA_LOCAL_CACHE"):
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kafka-local"


def require(tool: str, package: str, error: Callable[[str], Exception], needed_by: str) -> str:
    """The tool's path, or `error` saying how to install it."""
    path = shutil.which(tool)
    if path is None:
        raise error(f"'{tool}' was not found on PATH; {needed_by} needs it "
                    f"(install it with: apt-get install {package}).")
    return path


@contextmanager
def locked(target: Path) -> Iterator[None]:
    """Hold `target`'s lock file: concurrent first runs wait for one another instead of racing."""
    with open(target / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def resolve_jars(pom: bytes, name: str, error: Callable[[str], Exception], log=print) -> Path:
    """A directory with the POM's runtime jars, resolved with Maven the first time.

    The directory name carries a hash of the POM, so a version change resolves anew; a file lock
    makes concurrent first runs wait for one another instead of racing."""
    target = cache_root() / f"{name}-{hashlib.sha256(pom).hexdigest()[:12]}"
    jars = target / "jars"
    if (target / "complete").exists():
        return jars
    mvn = require("mvn", "maven", error, f"resolving {name}")
    target.mkdir(parents=True, exist_ok=True)
    with locked(target):
        if (target / "complete").exists():
            return jars
        log(f"{name}: resolving jars with Maven into {jars} (once)")
        (target / "pom.xml").write_bytes(pom)
        staging = target / "jars.partial"
        shutil.rmtree(staging, ignore_errors=True)
        started = time.monotonic()
        result = subprocess.run(
            [mvn, "-B", "-q", "-f", str(target / "pom.xml"), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            output = target / "maven.log"
            output.write_text(result.stdout + result.stderr)
            raise error(f"Maven could not resolve {name}'s jars (exit {result.returncode}; its output: {output}):\n"
                        + (result.stdout + result.stderr)[-3000:])
        shutil.rmtree(jars, ignore_errors=True)
        staging.rename(jars)
        (target / "complete").write_text(name)
        log(f"{name}: jars resolved in {time.monotonic() - started:.1f}s")
    return jars
