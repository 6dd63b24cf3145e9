"""deploy/spark-submit.sh passes on what the job resolves and what the operator set, nothing of its
own: a `job.toml` that puts the checkpoint on S3 gets it there (and the S3A jars), not a local
default that outranks it. Spark itself is replaced by a stand-in that records how it was called:
what is checked is the script's hand-over, not Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
SCRIPT = PROJECT / "deploy" / "spark-submit.sh"
PREFIX = "{{ cookiecutter.package_name | upper }}_"

# Records its arguments and the job's options in the environment, as spark-submit would receive them.
STAND_IN = "\n".join([
    "import json, os, sys",
    "prefix = os.environ['JOB_PREFIX']",
    "options = dict((k, v) for k, v in os.environ.items() if k.startswith(prefix))",
    "json.dump(dict(args=sys.argv[1:], env=options), open(os.environ['SUBMISSION_RECORD'], 'w'))",
])


@pytest.fixture
def spark_home(tmp_path: Path) -> Path:
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    (home / "jars").mkdir()
    (home / "jars" / "hadoop-client-api-3.4.1.jar").touch()  # the version S3A's jars must match
    submit = home / "bin" / "spark-submit"
    submit.write_text(f"#!{sys.executable}\n{STAND_IN}\n")
    submit.chmod(0o755)
    return home


def submit(spark_home: Path, tmp_path: Path, *arguments: str, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    record = tmp_path / "submission.json"
    environment = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)
                   and k not in ("SPARK_MASTER", "CHECKPOINT_LOCATION")}
    environment.update(SPARK_HOME=str(spark_home), PYTHON=sys.executable, SUBMISSION_RECORD=str(record),
                       JOB_PREFIX=PREFIX, **env)
    result = subprocess.run(["bash", str(SCRIPT), *arguments], env=environment, capture_output=True, text=True,
                            timeout=120)
    return result, (json.loads(record.read_text()) if record.exists() else {})


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_the_job_files_checkpoint_and_master_are_the_submissions(spark_home: Path, tmp_path: Path) -> None:
    job_file = tmp_path / "prod.toml"
    job_file.write_text('checkpoint_location = "s3a://counts-bucket/checkpoints/counts"\n'
                        'spark_master = "spark://spark-master:7077"\n')
    result, submitted = submit(spark_home, tmp_path, "run", "--config", str(job_file))
    assert result.returncode == 0, result.stderr
    args = submitted["args"]
    assert option(args, "--master") == "spark://spark-master:7077"
    assert "org.apache.hadoop:hadoop-aws:3.4.1" in option(args, "--packages")  # S3A, as the job file's checkpoint needs
    assert args[-3:] == ["run", "--config", str(job_file)]
    assert submitted["env"] == {}, "the script set options of its own, which outrank the job file"


def test_what_the_operator_sets_overrides_the_job_file_for_the_submission_and_the_job(
        spark_home: Path, tmp_path: Path) -> None:
    job_file = tmp_path / "prod.toml"
    job_file.write_text('checkpoint_location = "s3a://counts-bucket/checkpoints/counts"\n')
    result, submitted = submit(spark_home, tmp_path, "run", "--config", str(job_file),
                               SPARK_MASTER="yarn", CHECKPOINT_LOCATION="hdfs:///checkpoints/counts")
    assert result.returncode == 0, result.stderr
    args = submitted["args"]
    assert option(args, "--master") == "yarn"
    assert "hadoop-aws" not in option(args, "--packages")
    assert "spark-avro" not in option(args, "--packages")  # JSON values: no Avro
    assert submitted["env"] == {f"{PREFIX}SPARK_MASTER": "yarn",
                                f"{PREFIX}CHECKPOINT_LOCATION": "hdfs:///checkpoints/counts"}


def test_a_bad_option_stops_the_submission_in_one_line(spark_home: Path, tmp_path: Path) -> None:
    result, submitted = submit(spark_home, tmp_path, "run", "--set", "trigger_interval_seconds=-1")
    assert result.returncode == 2 and submitted == {}
    assert "trigger_interval_seconds" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr + result.stdout


def test_avro_values_add_spark_avro_of_the_same_spark(spark_home: Path, tmp_path: Path) -> None:
    job_file = tmp_path / "prod.toml"
    job_file.write_text('output_format = "avro"\n[schema_registry]\nurl = "http://registry:8081"\n')
    result, submitted = submit(spark_home, tmp_path, "run", "--config", str(job_file))
    assert result.returncode == 0, result.stderr
    packages = option(submitted["args"], "--packages").split(",")
    connector = next(package for package in packages if "spark-sql-kafka" in package)
    assert f"org.apache.spark:spark-avro_2.13:{connector.rsplit(':', 1)[1]}" in packages


def test_protobuf_values_add_protobuf_java_and_ship_the_jobs_codec(spark_home: Path, tmp_path: Path) -> None:
    job_file = tmp_path / "prod.toml"
    job_file.write_text('input_format = "protobuf"\n[schema_registry]\nurl = "http://registry:8081"\n')
    result, submitted = submit(spark_home, tmp_path, "run", "--config", str(job_file))
    assert result.returncode == 0, result.stderr
    assert "com.google.protobuf:protobuf-java:" in option(submitted["args"], "--packages")
    codec = Path(option(submitted["args"], "--jars"))
    assert codec.name.startswith("protobuf-codec-") and codec.is_file()
    assert "spark-avro" not in option(submitted["args"], "--packages")
