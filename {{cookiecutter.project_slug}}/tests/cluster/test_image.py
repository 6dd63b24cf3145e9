"""The job's container image (deploy/image/Dockerfile), built by `make image` and run as Spark on
Kubernetes runs a driver pod: the image's entry point in `driver` mode, spark-submit in client
mode, the connector resolved from `--packages` (the SparkApplication's deps.packages), the
checkpoint on S3. The output that a read_committed consumer sees is checked against the input."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }} import __version__
from {{ cookiecutter.package_name }}.spark.session import KAFKA_CONNECTOR
from {{ cookiecutter.package_name }}_tools.job_image import ImageUnavailable, JobImage, job_image

from harness import SECRET_VARIABLE, JobUnderTest, announce, merged, on_s3, produce_sample

pytestmark = pytest.mark.cluster

PROJECT = Path(__file__).resolve().parents[2]
TRUST_STORE = Path("/etc/ssl/certs/java/cacerts")  # Debian's Java trust store, the image's too
APP = "/opt/{{ cookiecutter.project_slug }}"  # where the image holds job.toml and deploy/main.py (spark-application.yaml)


@pytest.fixture(scope="module")
def image(kafka, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobImage]:
    """Built after the session's Kafka: where that is a container, its engine serves the build too."""
    tag = f"localhost/{{ cookiecutter.project_slug }}-test:{uuid.uuid4().hex[:8]}"
    try:
        with job_image(PROJECT, tag, tmp_path_factory.mktemp("image") / "build.log",
                       lambda line: announce(request, line)) as built:
            yield built
    except ImageUnavailable as error:
        pytest.fail(f"this test builds the job's image with Podman or Docker, and could not: {error}", pytrace=False)


def in_image(image: JobImage, *command: str) -> str:
    result = subprocess.run(image.command("run", "--rm", image.tag, *command), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def test_the_image_holds_the_job_and_runs_it_unprivileged(image):
    assert in_image(image, "python", "-m", "{{ cookiecutter.package_name }}", "--version") == f"{{ cookiecutter.package_name }} {__version__}"
    assert in_image(image, "id", "-u") == "185"  # Spark's images' user, not root
    config = in_image(image, "python", "-m", "{{ cookiecutter.package_name }}", "config", "--config", f"{APP}/job.toml")
    assert '"delivery_guarantee"' in config


def test_the_job_in_its_image_counts_exactly_once(image, job: JobUnderTest, s3_server, s3a_jars, monkeypatch):
    """The driver as the Spark operator starts it (`<image> driver ...`), on the host's network
    (Kafka and S3 listen on loopback), with the S3A jars mounted as a node would have them."""
    job.guarantee = "exactly-once"
    job.options.update(on_s3(job, s3_server, monkeypatch))
    # The S3A jars, as baked into a node's image (HADOOP_AWS_CLASSPATH in spark-submit.sh).
    jars = [Path(jar) for jar in s3a_jars.split(":")]
    mounts = [f"--volume={jar}:/opt/s3a/{jar.name}:ro" for jar in jars]
    if TRUST_STORE.exists():  # Ivy reaches the repository as the host does (through a proxy's CA, say)
        mounts.append(f"--volume={TRUST_STORE}:{TRUST_STORE}:ro")
    container = f"{{ cookiecutter.project_slug }}-{uuid.uuid4().hex[:8]}"
    job.launcher = image.command(
        "run", "--rm", f"--name={container}", "--network=host", f"--env={SECRET_VARIABLE}",
        "--env=SPARK_DRIVER_BIND_ADDRESS=127.0.0.1", *mounts, image.tag,
        # The operator sets spark.driver.host to the driver pod's service; here the host's loopback.
        "driver", "--master", "local[2]", "--name", "{{ cookiecutter.project_slug }}", "--conf", "spark.driver.host=127.0.0.1",
        "--packages", KAFKA_CONNECTOR,
        "--conf", "spark.driver.extraClassPath=" + ":".join(f"/opt/s3a/{jar.name}" for jar in jars),
        f"local://{APP}/deploy/main.py")
    job.launcher_env = {SECRET_VARIABLE: s3_server.secret_key}
    sample = produce_sample(job, count=3000, seed=41, partitions=4)
    try:
        ran = job.run(max_offsets_per_trigger="1000", timeout=600)
    finally:
        subprocess.run(image.command("rm", "--force", container), capture_output=True)
    assert ran.returncode == 0, ran.stdout[-3000:]
    kept, malformed = merged(sample)
    verdict = job.verify(kept, malformed)
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated, verdict.wrong_answers, verdict.missing_updates) == (0, 0, 0, 0)
    assert verdict.dead_letter_ok
