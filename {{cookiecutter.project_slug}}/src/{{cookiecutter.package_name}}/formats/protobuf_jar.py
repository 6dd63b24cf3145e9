"""The JVM's Protobuf codec (protobuf_codec/*.java: a decoder and an encoder that Spark calls as
UDFs, no record through Python), compiled once per version of its sources against PySpark's jars
and protobuf-java. `make venv` builds it into the package, so that a wheel (`make image`) carries
it; a start that finds none builds it into the job's cache, which needs a JDK's `javac` and Maven
(for protobuf-java) on the driver. Spark loads protobuf-java itself from PROTOBUF_JAVA (session.py).

    python -m {{ cookiecutter.package_name }}.formats.protobuf_jar    # builds it; prints its path
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyspark

from ..failures import ConfigError
from ..spark.resolved_jars import cache_root

PROTOBUF_JAVA_VERSION = "4.36.2"  # the Java runtime of the protobuf release the Python one (7.36.2) is
PROTOBUF_JAVA = f"com.google.protobuf:protobuf-java:{PROTOBUF_JAVA_VERSION}"
SOURCES = Path(__file__).parent / "protobuf_codec"


def jar_name() -> str:
    digest = hashlib.sha256()
    for source in sorted(SOURCES.glob("*.java")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return f"protobuf-codec-{digest.hexdigest()[:12]}.jar"


def codec_jar() -> Path:
    """The codec's jar for these sources: the package's, else the cache's, else built into the cache."""
    name = jar_name()
    for candidate in (SOURCES / name, cache_root() / "protobuf-codec" / name):
        if candidate.is_file():
            return candidate
    return build(cache_root() / "protobuf-codec")


def build(directory: Path) -> Path:
    """Compile the sources into `directory` (one build at a time on the host); the jar's path."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / jar_name()
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        javac, jar = _tool("javac"), _tool("jar")
        with tempfile.TemporaryDirectory(prefix="protobuf-codec-") as work:
            classes = Path(work) / "classes"
            spark_jars = Path(str(pyspark.__file__)).parent / "jars"
            class_path = os.pathsep.join((str(spark_jars / "*"), str(protobuf_java(Path(work)))))
            _run([str(javac), "--release", "17", "-nowarn", "-cp", class_path, "-d", str(classes),
                  *map(str, sorted(SOURCES.glob("*.java")))], "compiling the Protobuf codec")
            built = Path(work) / target.name
            _run([str(jar), "cf", str(built), "-C", str(classes), "."], "packaging the Protobuf codec")
            for old in directory.glob("protobuf-codec-*.jar"):
                old.unlink()
            os.replace(built, target)
    return target


def protobuf_java(work: Path) -> Path:
    """protobuf-java's jar: Maven's local repository's, else fetched by Maven."""
    group, artifact, version = PROTOBUF_JAVA.split(":")
    local = (Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version /
             f"{artifact}-{version}.jar")
    if local.is_file():
        return local
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConfigError("input_format", f"building the Protobuf codec needs {PROTOBUF_JAVA}, and Maven (`mvn`) is "
                                          "not installed to fetch it (apt-get install maven)")
    _run([mvn, "-B", "-q", "dependency:copy", f"-Dartifact={PROTOBUF_JAVA}", f"-DoutputDirectory={work}"],
         f"fetching {PROTOBUF_JAVA}")
    return work / f"{artifact}-{version}.jar"


def _tool(name: str) -> Path:
    home = os.environ.get("JAVA_HOME")
    candidates = [Path(home) / "bin" / name] if home else []
    found = next((path for path in candidates if path.is_file()), None) or shutil.which(name)
    if found is None:
        raise ConfigError("input_format", "building the Protobuf codec needs a JDK " + f"(its {name}; a JRE has none): "
                                          "install one (apt-get install openjdk-17-jdk-headless), or build the codec "
                                          "where one is (`make venv`) and install that package")
    return Path(found)


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ConfigError("input_format", f"{what} failed ({' '.join(command[:2])}): "
                                          f"{(result.stderr or result.stdout).strip()[-2000:]}")


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        print(build(SOURCES) if os.access(SOURCES, os.W_OK) else codec_jar())
    sys.exit(0)
