"""The driver JVM's class-data-sharing archive: the classes a start loads, stored once, mapped by
every later start instead of being read, parsed and verified again (seconds of each start).

A `run` on a host without the archive (per JVM, PySpark and connector jars) has its JVM write it
as it exits (`-XX:ArchiveClassesAtExit`, a few seconds, once); `finish` waits for that after the
session stopped and moves the archive in place. Later starts pass `-XX:SharedArchiveFile`. The
JVM checks the archive against its own version and class path and ignores one that does not
match; the archive's name changes with any of them, so a changed install is archived afresh. A
run killed meanwhile leaves a partial file that is never used. Local mode only: under
`spark-submit` the JVM options are spark-submit's.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from .resolved_jars import cache_root

# Whatever the JVM says about the archive (refused, written) stays out of the job's output.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
WRITE_OPTION = re.compile(r"-XX:ArchiveClassesAtExit=(\S+)")
STALE_SECONDS = 3600  # a partial archive older than this was left by a killed run
KEPT = 3  # archives kept, the most recently used (another venv or PySpark install has its own)
# The claims this process holds: an archive's key, its claim file's descriptor (locked).
_claims: dict[str, int] = {}


def archive_dir() -> Path:
    return cache_root() / "class-archives"


def _inputs() -> list[str]:
    """What the archive is valid for: the JVM binary and every jar on the JVM's class path."""
    from pyspark.find_spark_home import _find_spark_home

    java_home = os.environ.get("JAVA_HOME")
    java = shutil.which("java", path=os.path.join(java_home, "bin")) if java_home else shutil.which("java")
    files = [Path(java).resolve()] if java else []
    files += sorted((Path(_find_spark_home()) / "jars").glob("*.jar"))
    described = []
    for path in files:
        with contextlib.suppress(OSError):
            stat = path.stat()
            described.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
    return described


def java_options(class_path: list[str], write: bool, directory: Path | None = None) -> str:
    """The driver JVM's options, given the jars its class path adds to PySpark's: map the archive;
    or, without one and with `write`, have the JVM write it at exit, unless a live run is writing
    it already."""
    directory = directory or archive_dir()
    key = hashlib.sha256("\n".join([*_inputs(), "class path:", *class_path]).encode()).hexdigest()[:16]
    archive = directory / f"{key}.jsa"
    if archive.is_file():
        with contextlib.suppress(OSError):
            os.utime(archive)  # used: the last to be pruned
        return f"-XX:SharedArchiveFile={archive} {QUIET}"
    if not write or not _claim(directory, key):
        return ""
    return f"-XX:ArchiveClassesAtExit={directory / f'{key}.{uuid.uuid4().hex[:8]}.partial'} {QUIET}"


def finish(options: str, gateway: subprocess.Popen | None, timeout: float = 120) -> None:
    """After the session stopped: if `options` (the driver JVM's) had it write the archive, end
    the JVM (stdin closed: PySpark's gateway exits), wait while it writes, put the archive in place."""
    if gateway is None or (found := WRITE_OPTION.search(options)) is None:
        return
    partial = Path(found[1])
    key = partial.name.split(".", 1)[0]
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        if gateway.stdin is not None:
            gateway.stdin.close()
        gateway.wait(timeout)
        if gateway.returncode == 0 and partial.is_file():
            os.replace(partial, partial.with_name(f"{key}.jsa"))
            _prune(partial.parent)
    with contextlib.suppress(OSError):
        partial.unlink(missing_ok=True)
        (partial.parent / f"{key}.claim").unlink(missing_ok=True)
    if (claim := _claims.pop(key, None)) is not None:
        os.close(claim)


def _prune(directory: Path, keep: int = KEPT) -> None:
    """Drop all but the `keep` most recently used archives (a JVM that maps one keeps its mapping)."""
    archives = sorted(directory.glob("*.jsa"), key=lambda path: path.stat().st_mtime, reverse=True)
    for stale in archives[keep:]:
        stale.unlink(missing_ok=True)


def _claim(directory: Path, key: str) -> bool:
    """One run writes the archive at a time: the one holding the lock on a claim file, which the
    kernel releases when that run ends, killed or not."""
    with contextlib.suppress(OSError):
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("*.partial"):  # written by the JVMs of killed runs
            if time.time() - old.stat().st_mtime > STALE_SECONDS:
                old.unlink()
        claim = os.open(directory / f"{key}.claim", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another run holds it (or this one, for another session)
            os.close(claim)
            return False
        _claims[key] = claim
        return True
    return False
    return True
