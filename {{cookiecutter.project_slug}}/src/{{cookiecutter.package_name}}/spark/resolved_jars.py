"""The connector's jars, resolved by Ivy once and then put on the class path directly.

`spark.jars.packages` has Ivy resolve the Kafka connector (and hadoop-aws for S3) at every start:
one to two seconds of the JVM's start even when Ivy's cache holds every jar. After a start that
resolved them, the list of jar files Spark put on its class path is kept in a small file (one per
set of packages and Ivy settings); later starts on this host put those files on the driver's class
path in local mode, or pass them as `spark.jars` (session.py).
A list whose jars are gone (Ivy's cache cleared) is ignored and resolved again; first starts
on a host resolve one at a time (Ivy's cache is not safe for concurrent resolutions). Under
`spark-submit` none of this applies: its `--packages` or `--jars` decide (deploy/spark-submit.sh).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

# Settings that change what resolves, or where to: with any of them in the job's [spark] table,
# Ivy resolves at every start as Spark would.
RESOLUTION_SETTINGS = frozenset({"spark.jars", "spark.jars.packages", "spark.jars.ivy", "spark.jars.repositories",
                                 "spark.jars.excludes"})


def cache_root() -> Path:
    """The job's caches on this host: the jar lists here, the class archives (class_archive.py)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "{{ cookiecutter.project_slug }}"


def cache_dir() -> Path:
    return cache_root() / "spark-jars"


class ResolvedJars:
    """The jars of `packages` as resolved with `ivy_settings`: known after one resolution."""

    def __init__(self, packages: tuple[str, ...], ivy_settings: Path, directory: Path | None = None) -> None:
        self.packages = packages
        key = hashlib.sha256("\n".join((*packages, ivy_settings.read_text())).encode()).hexdigest()[:16]
        self.list_file = (directory or cache_dir()) / f"{key}.txt"

    def known(self) -> list[str] | None:
        """The jar files of the last resolution, if every one of them is still there."""
        try:
            jars = [line for line in self.list_file.read_text().splitlines() if line]
        except OSError:
            return None
        if not jars or not all(Path(jar).is_file() for jar in jars):
            return None
        return jars

    @contextlib.contextmanager
    def resolution(self) -> Iterator[list[str] | None]:
        """Held while a start resolves, so that starts on a host resolve one at a time, whatever
        their packages; yields the jars if a start that held it before resolved them meanwhile."""
        try:
            self.list_file.parent.mkdir(parents=True, exist_ok=True)
            # One lock for every package set: two sets share modules in Ivy's cache (hadoop's).
            lock = open(self.list_file.with_name("resolving.lock"), "w")  # noqa: SIM115 - closed below
        except OSError:
            yield None  # an unwritable cache: resolve without waiting for anyone
            return
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield self.known()

    def remember(self, spark_jars: str) -> None:
        """Keep the jar files a resolution put in `spark.jars` (URIs, comma-separated). Best effort:
        a cache that cannot be written costs the next start its resolution, nothing else."""
        jars = [unquote(urlparse(uri).path) if uri.startswith("file:") else uri
                for uri in spark_jars.split(",") if uri]
        if not jars or not all(Path(jar).is_file() for jar in jars):
            return
        with contextlib.suppress(OSError):
            self.list_file.parent.mkdir(parents=True, exist_ok=True)
            # Written aside and renamed: a job starting meanwhile reads the old list or the new one.
            with tempfile.NamedTemporaryFile("w", dir=self.list_file.parent, delete=False) as out:
                out.write("\n".join(jars) + "\n")
            os.replace(out.name, self.list_file)
