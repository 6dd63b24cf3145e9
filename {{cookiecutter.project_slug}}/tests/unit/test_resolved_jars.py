"""The connector's jars: resolved by Ivy once, then taken from the class path (resolved_jars.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from {{ cookiecutter.package_name }}.spark import session
from {{ cookiecutter.package_name }}.spark.resolved_jars import ResolvedJars


def _jars(tmp_path: Path, *names: str) -> list[Path]:
    paths = [tmp_path / "ivy" / name for name in names]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PK")
    return paths


def test_a_resolution_is_remembered_and_forgotten_once_a_jar_is_gone(tmp_path):
    jars = ResolvedJars(("g:a:1",), session.IVY_SETTINGS, tmp_path / "cache")
    assert jars.known() is None  # nothing resolved yet
    first, second = _jars(tmp_path, "g_a-1.jar", "g_b 2.jar")
    jars.remember(f"{first.as_uri()},{second.as_uri()}")
    assert jars.known() == [str(first), str(second)]  # the space in a name survives the URI
    second.unlink()  # Ivy's cache cleared: resolve again rather than start without a jar
    assert jars.known() is None


def test_another_package_set_or_ivy_settings_has_a_list_of_its_own(tmp_path):
    settings = tmp_path / "ivysettings.xml"
    settings.write_text(session.IVY_SETTINGS.read_text())
    base = ResolvedJars(("g:a:1",), settings, tmp_path)
    assert ResolvedJars(("g:a:1", "g:b:1"), settings, tmp_path).list_file != base.list_file
    settings.write_text(settings.read_text().replace("central", "mirror"))
    assert ResolvedJars(("g:a:1",), settings, tmp_path).list_file != base.list_file


def test_a_resolution_naming_a_missing_jar_or_an_unwritable_cache_is_not_remembered(tmp_path):
    (jar,) = _jars(tmp_path, "g_a-1.jar")
    jars = ResolvedJars(("g:a:1",), session.IVY_SETTINGS, tmp_path / "cache")
    jars.remember(f"{jar.as_uri()},{(tmp_path / 'gone.jar').as_uri()}")
    assert jars.known() is None
    blocked = tmp_path / "file"
    blocked.write_text("")
    ResolvedJars(("g:a:1",), session.IVY_SETTINGS, blocked / "cache").remember(jar.as_uri())  # no error


def test_starts_resolve_once_then_take_the_jars_from_the_class_path_and_the_classes_from_an_archive(tmp_path):
    """Three real starts with empty caches: the first resolves with Ivy and remembers the jars;
    the second resolves nothing, has the Kafka source from its class path, and its JVM writes the class archive
    as it stops; the third maps that archive (class_archive.py)."""
    app = tmp_path / "app.py"
    app.write_text(
        "from {{ cookiecutter.package_name }}.spark import session\n"
        "spark = session.spark_session('jars-check', 'local[1]', 1, write_class_archive=True)\n"
        "loader = spark._jvm.Thread.currentThread().getContextClassLoader()\n"
        "spark._jvm.java.lang.Class.forName('org.apache.spark.sql.kafka010.KafkaSourceProvider', True, loader)\n"
        "print('JARS=' + spark.sparkContext.getConf().get('spark.jars', ''))\n"
        "print('CLASSPATH=' + spark.sparkContext.getConf().get('spark.driver.extraClassPath', ''))\n"
        "print('JVM=' + spark.sparkContext.getConf().get('spark.driver.extraJavaOptions', ''))\n"
        "session.stop(spark)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    archives = tmp_path / "cache" / "{{ cookiecutter.project_slug }}" / "class-archives"
    runs = []
    for _ in range(3):
        runs.append(subprocess.run([sys.executable, str(app)], capture_output=True, text=True, env=env, timeout=300))
        assert runs[-1].returncode == 0 and "JARS=" in runs[-1].stdout, runs[-1].stderr[-3000:]
        if len(runs) == 2:  # written by the second start's JVM as it stopped, then put in place
            assert [path.suffix for path in archives.iterdir()] == [".jsa"], list(archives.iterdir())
    first, second, third = (run.stdout + run.stderr for run in runs)
    assert ":: resolving dependencies" in first and "ArchiveClassesAtExit" not in first
    assert ":: resolving dependencies" not in second and "-XX:ArchiveClassesAtExit=" in second
    assert "spark-sql-kafka-0-10" in second.split("CLASSPATH=")[1]  # local mode: on the driver's class path
    assert f"-XX:SharedArchiveFile={next(archives.glob('*.jsa'))}" in third


def test_first_starts_resolve_one_at_a_time_and_a_waiting_one_takes_what_the_first_found(tmp_path):
    import threading

    (jar,) = _jars(tmp_path, "g_a-1.jar")
    first = ResolvedJars(("g:a:1",), session.IVY_SETTINGS, tmp_path / "cache")
    second = ResolvedJars(("g:a:1",), session.IVY_SETTINGS, tmp_path / "cache")
    waited: list = []
    with first.resolution() as found:
        assert found is None  # nothing resolved yet: this start resolves
        other = threading.Thread(target=lambda: waited.append(second.resolution().__enter__()))
        other.start()
        other.join(1.0)
        assert other.is_alive() and waited == []  # the second start waits for the first
        first.remember(jar.as_uri())
    other.join(10)
    assert waited == [[str(jar)]]  # and then puts the first one's jars on its class path


def test_resolutions_of_other_packages_wait_too(tmp_path):
    """Two package sets share modules in Ivy's cache (the connector's and hadoop-aws's hadoop jars)."""
    import threading

    connector = ResolvedJars(("g:kafka:1",), session.IVY_SETTINGS, tmp_path / "cache")
    s3 = ResolvedJars(("g:kafka:1", "g:aws:1"), session.IVY_SETTINGS, tmp_path / "cache")
    entered = threading.Event()

    def resolve_s3() -> None:
        with s3.resolution():
            entered.set()

    with connector.resolution():
        other = threading.Thread(target=resolve_s3)
        other.start()
        assert not entered.wait(1.0)  # waits while the connector resolves
    other.join(10)
    assert entered.is_set()
