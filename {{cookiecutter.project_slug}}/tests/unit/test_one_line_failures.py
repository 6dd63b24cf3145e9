"""Every command that talks to Kafka or to S3 fails on a service that does not answer, in one line
naming the option and the bound the command waited (at most 15 s), exit status 2: no traceback,
none of the client's own log lines. The bound is read from the line the command prints, never
from this test's clock: a loaded machine makes a command slower, not wrong."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from {{ cookiecutter.package_name }}_tools.job_file import query_config, query_settings
from {{ cookiecutter.package_name }}_tools.processes import free_port

# The query as job.toml configures it: the commands run in a directory of their own, without it.
QUERY_CONFIG = query_config(Path(__file__).resolve().parents[2] / "job.toml")
QUERY = query_settings(QUERY_CONFIG)
# A query without an answer per key to keep refuses these before reaching any service.
WITHOUT_ANSWER_STATE = {% if cookiecutter.query == "count-by-key" %}(){% else %}("state", "savepoint create"){% endif %}
JOB = [sys.executable, "-m", "{{ cookiecutter.package_name }}"]
TOOLS = [sys.executable, "-m", "{{ cookiecutter.package_name }}_tools"]
COMMANDS = {  # each with a checkpoint that has a committed batch, so that it reaches Kafka
    "run": [*JOB, "run"],
    "status": [*JOB, "status"],
    "state": [*JOB, "state"],
    "topics create": [*JOB, "topics", "create"],
    "savepoint create": [*JOB, "savepoint", "create", "--to", "savepoint"],
    "produce-sample": [*TOOLS, "produce-sample", "--count", "10"],
}


MAX_WAIT_SECONDS = 15  # the longest a command waits for a service that does not answer


def assert_waited_at_most(name: str, line: str, most: int = MAX_WAIT_SECONDS) -> None:
    """The line names the bound the command waited (a setting, not a measurement), at most `most` seconds."""
    waited = re.search(r" within (\d+)s\b", line)
    assert waited, f"{name}: the line names no bound: {line}"
    assert int(waited[1]) <= most, f"{name}: waits {waited[1]}s for a service, more than {most}s: {line}"


def assert_one_line(name: str, result: subprocess.CompletedProcess, expected: str) -> None:
    """Exit status 2 and a single line (stdout and stderr together) that starts with `expected`."""
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert result.returncode == 2, f"{name}: exit {result.returncode}: {lines[-20:]}"
    assert len(lines) == 1, f"{name}: {len(lines)} lines: {lines[:20]}"
    assert lines[0].startswith(expected), f"{name}: {lines[0]}"


def test_each_kafka_facing_command_fails_in_one_line_naming_bootstrap_servers(tmp_path: Path) -> None:
    (tmp_path / "checkpoint" / "commits").mkdir(parents=True)
    (tmp_path / "checkpoint" / "commits" / "0").write_text("v1\n{}\n")
    nobody = f"127.0.0.1:{free_port()}"  # nothing listens there: every connection is refused

    def attempt(command: list[str]) -> subprocess.CompletedProcess:
        settings = {**QUERY, "bootstrap_servers": nobody, "checkpoint_location": str(tmp_path / "checkpoint"),
                    "delivery_guarantee": "exactly-once"}  # `state` reads the sink's markers with this one
        arguments = [argument for name, value in settings.items() for argument in ("--set", f"{name}={value}")]
        return subprocess.run([*command, *arguments], cwd=tmp_path, capture_output=True, text=True, timeout=600)

    with ThreadPoolExecutor(len(COMMANDS)) as pool:  # side by side: each waits for the broker, not the CPU
        results = dict(zip(COMMANDS, pool.map(attempt, COMMANDS.values()), strict=True))
    for name, result in results.items():
        if name in WITHOUT_ANSWER_STATE:
            assert_one_line(name, result, "error: configuration option 'savepoint': ")
            continue
        assert_one_line(name, result, f"error: configuration option 'bootstrap_servers': Kafka at {nobody} did not "
                                      "answer within ")
        assert_waited_at_most(name, result.stdout + result.stderr)


S3_COMMANDS = {  # each reads or writes a location on S3 first: the checkpoint, or the savepoint given
    "status": [*JOB, "status"],
    "status --check": [*JOB, "status", "--check", "--max-batch-age", "300"],
    "state": [*JOB, "state"],
    "savepoint create": [*JOB, "savepoint", "create", "--to", "s3a://savepoints/one"],
    "savepoint inspect": [*JOB, "savepoint", "inspect", "s3a://savepoints/one"],
}


def test_each_s3_facing_command_fails_in_one_line_naming_the_endpoint(tmp_path: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    settings = {**QUERY, "checkpoint_location": "s3a://checkpoints/job", "s3.endpoint": nobody,
                "s3.access_key_id": "key", "s3.secret_access_key": "secret", "s3.path_style_access": "true"}
    arguments = [argument for name, value in settings.items() for argument in ("--set", f"{name}={value}")]
    for name, command in S3_COMMANDS.items():
        result = subprocess.run([*command, *arguments], cwd=tmp_path, capture_output=True, text=True, timeout=600)
        if name in WITHOUT_ANSWER_STATE:
            assert_one_line(name, result, "error: configuration option 'savepoint': ")
            continue
        assert_one_line(name, result, f"error: configuration option 's3.endpoint': cannot reach {nobody} within ")
        assert_waited_at_most(name, result.stdout + result.stderr)


def test_kafka_up_fails_in_one_line(tmp_path: Path) -> None:
    """A workdir that cannot be made, and no Maven to resolve Kafka's jars with (an empty jar cache)."""
    (tmp_path / "file").write_text("")
    cases = {
        "--workdir": ([*TOOLS, "kafka", "--workdir", str(tmp_path / "file" / "kafka"), "up"], {},
                      "error: configuration option '--workdir': cannot create "),
        "no maven": ([*TOOLS, "kafka", "--workdir", str(tmp_path / "kafka"), "up"],
                     {"KAFKA_LOCAL_CACHE": str(tmp_path / "cache"), "PATH": str(tmp_path / "empty")},
                     "error: 'mvn' was not found on PATH"),
    }
    for name, (command, env, expected) in cases.items():
        result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                                env={**os.environ, **env})
        assert_one_line(name, result, expected)
