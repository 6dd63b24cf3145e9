"""The cluster tests' fixtures: a Spark standalone cluster (a master and two workers on the
loopback interface, the tools' spark_cluster.py), a real S3 server for the checkpoint, and the job
submitted to them by deploy/spark-submit.sh, the script a team uses."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}_tools.s3_local import S3Server
from {{ cookiecutter.package_name }}_tools.spark_cluster import ClusterUnavailable, SparkCluster, s3a_classpath

from harness import SECRET_VARIABLE, JobUnderTest, on_s3, serving, submit_args

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def spark_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    yield from serving(request, SparkCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2), ClusterUnavailable,
                       "these tests need a Spark standalone cluster",
                       lambda cluster, seconds: f"spark: standalone cluster at {cluster.url} (a master and 2 workers), "
                                                f"up in {seconds:.1f}s")


@pytest.fixture(scope="session")
def s3a_jars() -> str:
    try:
        return s3a_classpath()
    except ClusterUnavailable as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture
def cluster_job(job: JobUnderTest, spark_cluster: SparkCluster, s3_server: S3Server, s3a_jars: str,
                monkeypatch: pytest.MonkeyPatch) -> JobUnderTest:
    """The job with its checkpoint in a fresh bucket, submitted to the cluster by spark-submit.sh
    as a deployment submits it: `run --config job.toml`, the file holding every option (the
    checkpoint on S3 among them), no `--set`, CHECKPOINT_LOCATION unset."""
    job.guarantee = "exactly-once"
    job.options.update(on_s3(job, s3_server, monkeypatch))
    job.launcher = ["bash", str(PROJECT / "deploy" / "spark-submit.sh")]
    job.job_file = job.workdir / "job.toml"
    job.launcher_env = {"SPARK_MASTER": spark_cluster.url, "PYTHON": sys.executable,
                        SECRET_VARIABLE: s3_server.secret_key,
                        "HADOOP_AWS_CLASSPATH": s3a_jars,
                        "SPARK_SUBMIT_ARGS": submit_args(executors=1)}
    return job
