"""The README's command blocks, run as written: the quick start's `make demo`; its "By hand, step
by step" and, before its lines that stop the local services, the savepoint walk-through. Their
lines, in order, are pasted into bash in a directory that holds the project's job file, its
output schema and `.venv` (this suite's environment), with nothing set beforehand. `kafka up
--env` starts the local broker (`registry up --env` a schema registry, for Avro values) and hands
its address to the commands after it; the job runs until idle and `status` reports what it
committed; a savepoint of it resumes, changed, on a new checkpoint and counts the events produced
after it (a query without state: the changed job goes on from its own checkpoint)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

PROJECT = Path(__file__).resolve().parents[2]
TOOLS = "{{ cookiecutter.project_slug }}-tools"


def command_block(after: str) -> list[str]:
    """The lines of the first indented block (a paragraph of lines that all start with four
    spaces) after the text `after`."""
    readme = (PROJECT / "README.md").read_text()
    for paragraph in readme.split(after, 1)[1].split("\n\n"):
        lines = paragraph.strip("\n").splitlines()
        if lines and all(line.startswith("    ") for line in lines):
            return [line[4:] for line in lines]
    raise AssertionError(f"no command block after {after!r} in the README")


def pasted(lines: list[str]) -> list[str]:
    """Lines a user pastes into a shell in the project's directory: each runs a command of its venv."""
    assert lines and all(line.startswith(("eval", ".venv/bin/")) for line in lines), lines
    return lines


def a_new_users_environment(tmp_path: Path) -> dict[str, str]:
    """This suite's environment without the job's options and broker address a test run may set,
    with Spark's scratch space in `tmp_path`."""
    prefix = "{{ cookiecutter.package_name | upper }}_"
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefix) and k != "KAFKA_BOOTSTRAP_SERVERS"}
    env["SPARK_LOCAL_DIRS"] = str(tmp_path / "spark-local")
    return env


def project_directory(tmp_path: Path, *files: str) -> Path:
    """`tmp_path` as a user's copy of the project: `files` copied from it (with their times, which
    make compares) and `.venv`, the environment `make venv` made for this suite."""
    (tmp_path / ".venv").symlink_to(sys.prefix)
    for name in files:
        (tmp_path / name).parent.mkdir(exist_ok=True)
        shutil.copy2(PROJECT / name, tmp_path / name)
    return tmp_path


def test_the_quick_starts_demo_runs_as_written(tmp_path: Path) -> None:
    """`make demo`, the quick start's first command, in a directory with the project's Makefile,
    job file, output schema and `.venv` (this suite's; `-o` keeps make from installing it again):
    it starts a local broker from Kafka's jars (and a registry, for Avro values), produces the
    sample, runs the job and checks every answer."""
    commands = command_block("## Quick start")
    assert [line.split("#")[0].strip() for line in commands] == ["make demo", "make test", "make test-fast"], commands
    project = project_directory(tmp_path, "Makefile", "job.toml", "schemas/output.avsc", "pyproject.toml",
                                "tools/pyproject.toml")
    result = subprocess.run(["make", "-o", ".venv/.installed", "demo"], cwd=project,
                            env=a_new_users_environment(tmp_path), capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert re.search(r"demo: OK: 20000 events in", result.stdout), output[-4000:]


def test_the_by_hand_and_savepoint_blocks_run_as_written(tmp_path: Path) -> None:
    """The savepoint walk-through where the README has one (a count per key, which savepoints
    move); for the other queries, the change of a running job on its own checkpoint."""
    by_hand = pasted(command_block("By hand, step by step"))
    first_down = next(i for i, line in enumerate(by_hand) if line.endswith(" down"))  # the local services stopped
    by_hand, downs = by_hand[:first_down], by_hand[first_down:]
    assert downs[-1].endswith("kafka down"), downs
    savepoints = "savepoint (Flink's word)" in (PROJECT / "README.md").read_text()
    walk_through = "savepoint (Flink's word)" if savepoints else "goes on from its checkpoint"
    lines = [*by_hand, *pasted(command_block(walk_through)), *downs]
    project_directory(tmp_path, "job.toml", "schemas/output.avsc")
    env = a_new_users_environment(tmp_path)
    script = "set -euo pipefail\n" + "\n".join(f"echo '+ {line[:40]}'\n{line}" for line in lines)
    try:
        result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=600)
    finally:  # a broker (and a registry) left by a failed line
        for service in ("registry", "kafka"):
            subprocess.run([str(tmp_path / ".venv" / "bin" / TOOLS), service, "down"], cwd=tmp_path, env=env,
                           capture_output=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert re.search(r"kafka: local broker ready at 127\.0\.0\.1:\d+", output), output[-4000:]
    committed = [int(n) for n in re.findall(r"checkpoint \S+: (\d+) committed batches retained", result.stdout)]
    assert committed and committed[0] > 0, result.stdout[-4000:]
    if not savepoints:  # the changed job went on from the checkpoint, with the events produced after it
        assert len(committed) == 2 and committed[1] > committed[0], result.stdout[-4000:]
    else:
        saved = re.search(r"savepoint \S+: batch \d+, (\d+) keys ", result.stdout)
        assert saved and int(saved[1]) > 0, result.stdout[-4000:]
        # The resumed job committed a batch (`state` reads its last) and kept the savepoint's keys.
        resumed = re.search(r"state of \S*checkpoints-v2\S* after batch \d+ .*\n.*\n.*\n  keys (\d+)", result.stdout)
        assert resumed and int(resumed[1]) >= int(saved[1]), result.stdout[-4000:]
    assert "kafka: stopped" in result.stdout, result.stdout[-2000:]
