"""The driver JVM's class archive: written once by one run, put in place only when complete."""

from __future__ import annotations

import subprocess
import sys

from {{ cookiecutter.package_name }}.spark import class_archive


def test_one_run_writes_the_archive_and_later_starts_map_it(tmp_path):
    writing = class_archive.java_options(["/jars/a.jar"], write=True, directory=tmp_path)
    assert writing.startswith("-XX:ArchiveClassesAtExit=") and class_archive.QUIET in writing
    assert class_archive.java_options(["/jars/a.jar"], write=True, directory=tmp_path) == ""  # claimed by this run
    assert class_archive.java_options(["/jars/a.jar"], write=False, directory=tmp_path) == ""
    partial = writing.split()[0].split("=", 1)[1]
    # A JVM stand-in: it waits for its stdin to close, as PySpark's gateway does, then writes the archive.
    jvm = f"import sys; sys.stdin.read(); open({partial!r}, 'w').write('x')"
    gateway = subprocess.Popen([sys.executable, "-c", jvm], stdin=subprocess.PIPE)
    class_archive.finish(writing, gateway)
    (archive,) = tmp_path.glob("*.jsa")
    assert sorted(path.name for path in tmp_path.iterdir()) == [archive.name]  # no claim, no partial left
    assert class_archive.java_options(["/jars/a.jar"], write=True, directory=tmp_path) == \
        f"-XX:SharedArchiveFile={archive} {class_archive.QUIET}"
    assert class_archive.java_options(["/jars/b.jar"], write=False, directory=tmp_path) == ""  # other jars: another


def test_a_claim_is_held_while_its_run_lives_and_taken_over_once_it_is_killed(tmp_path):
    # Another run, in a process of its own: it claims the archive, says so, then sleeps until killed.
    run = ("import sys, time; from pathlib import Path; "
           "from {{ cookiecutter.package_name }}.spark import class_archive; "
           f"print(class_archive.java_options([], write=True, directory=Path({str(tmp_path)!r})), flush=True); "
           "time.sleep(600)")
    other = subprocess.Popen([sys.executable, "-c", run], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().startswith("-XX:ArchiveClassesAtExit=")
        assert class_archive.java_options([], write=True, directory=tmp_path) == ""  # that run writes it
    finally:
        other.kill()
        other.wait()
    taken = class_archive.java_options([], write=True, directory=tmp_path)
    assert taken.startswith("-XX:ArchiveClassesAtExit=")
    jvm = "import sys; sys.stdin.read(); sys.exit(3)"
    failed = subprocess.Popen([sys.executable, "-c", jvm], stdin=subprocess.PIPE)
    partial = tmp_path / taken.split()[0].split("=", 1)[1]
    partial.write_text("torn")
    class_archive.finish(taken, failed)  # the JVM did not exit cleanly: its file is not an archive
    assert list(tmp_path.glob("*.jsa")) == [] and not partial.exists()
    assert class_archive.java_options([], write=True, directory=tmp_path) != ""  # released: claimed again
    class_archive.finish("-Dother=1", None)  # a session that wrote nothing: nothing to do


def test_only_the_most_recently_used_archives_are_kept(tmp_path):
    import os

    for age, name in enumerate(["newest", "used", "older", "oldest"]):
        (tmp_path / f"{name}.jsa").write_text(name)
        os.utime(tmp_path / f"{name}.jsa", (1_000_000 - age * 10, 1_000_000 - age * 10))
    class_archive._prune(tmp_path, keep=3)
    assert sorted(path.stem for path in tmp_path.glob("*.jsa")) == ["newest", "older", "used"]
