"""What the Flink contender (flink_job.py) runs with, set up by the bench itself on first use, in
caches outside the project: PyFlink in a virtual environment of its own (its ~850 MB would crowd
the job's), and Flink's Kafka SQL connector, resolved by Maven. The connector's release is the one
built for the pinned Flink (its version ends in the Flink minor it targets)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
import time
from pathlib import Path

from ..maven import cache_root, resolve_jars

FLINK_VERSION = "2.2.1"
CONNECTOR = ("org.apache.flink", "flink-sql-connector-kafka", "5.0.0-2.2")
POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>bench</groupId><artifactId>flink-kafka-connector</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>{CONNECTOR[0]}</groupId><artifactId>{CONNECTOR[1]}</artifactId><version>{CONNECTOR[2]}</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
  </dependencies>
</project>
""".encode()


class FlinkUnavailable(RuntimeError):
    """PyFlink or its Kafka connector could not be set up."""


def python(log=print) -> Path:
    """The Python of a venv with apache-flink==FLINK_VERSION, made (once) beside the Kafka jars' cache."""
    venv = cache_root() / f"flink-venv-{FLINK_VERSION}"
    interpreter = venv / "bin" / "python"
    if (venv / "complete").exists():
        return interpreter
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"flink-venv-{FLINK_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / "complete").exists():
            return interpreter
        log(f"bench: installing apache-flink=={FLINK_VERSION} into {venv} (once, about 850 MB)")
        started = time.monotonic()
        for command in ([sys.executable, "-m", "venv", "--clear", str(venv)],
                        [str(interpreter), "-m", "pip", "install", "--disable-pip-version-check", "-q",
                         f"apache-flink=={FLINK_VERSION}"]):
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise FlinkUnavailable(f"setting up PyFlink failed ({' '.join(command[:3])} ...):\n"
                                       f"{(result.stdout + result.stderr)[-3000:]}")
        (venv / "complete").write_text(FLINK_VERSION)
        log(f"bench: PyFlink installed in {time.monotonic() - started:.0f}s")
    return interpreter


def connector_jar(log=print) -> Path:
    """Flink's Kafka SQL connector (one shaded jar)."""
    jars = resolve_jars(POM, "flink-kafka-connector", FlinkUnavailable, log=log)
    found = sorted(jars.glob(f"{CONNECTOR[1]}-*.jar"))
    if not found:
        raise FlinkUnavailable(f"{':'.join(CONNECTOR)} is not among the resolved jars in {jars}")
    return found[0]
