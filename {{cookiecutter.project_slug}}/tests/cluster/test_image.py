"""The job's container image (deploy/image/Dockerfile), built by `make image` and run as the
SparkApplication (deploy/k8s/spark-application.yaml) runs its driver pod: the image's entry point
in `driver` mode, spark-submit in client mode, the connector resolved from `--packages`, the
manifest's own arguments, environment and mounts (the ConfigMap's job file where the manifest
mounts it, the Secret's variables), the checkpoint on S3. The output that a read_committed
consumer sees is checked against the input, and the manifest's liveness probe is run in the
driver's container as the kubelet runs it: 0 while the job is healthy, 1 when it is stuck."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from {{ cookiecutter.package_name }} import __version__
from {{ cookiecutter.package_name }}.spark.session import KAFKA_CONNECTOR
from {{ cookiecutter.package_name }}_tools.job_file import write_job_file
from {{ cookiecutter.package_name }}_tools.job_image import ImageUnavailable, JobImage, job_image
from {{ cookiecutter.package_name }}_tools.processes import start_job

from harness import SECRET_VARIABLE, JobUnderTest, announce, merged, on_s3, produce_sample, wait_until

pytestmark = pytest.mark.cluster

PROJECT = Path(__file__).resolve().parents[2]
MANIFEST = PROJECT / "deploy" / "k8s" / "spark-application.yaml"
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
    package = "{{ cookiecutter.package_name }}"
    assert in_image(image, "python", "-m", package, "--version") == f"{package} {__version__}"
    assert in_image(image, "id", "-u") == "185"  # Spark's images' user, not root
    config = in_image(image, "python", "-m", package, "config", "--config", f"{APP}/job.toml")
    assert '"delivery_guarantee"' in config


@dataclass(frozen=True)
class DriverPod:
    """What the SparkApplication gives its driver's container, read from the manifest itself."""

    main_file: str  # mainApplicationFile, a local:// path in the image
    arguments: list[str]
    packages: list[str]
    env: dict[str, str]
    job_file_directory: str  # where the ConfigMap is mounted
    secret_optional: bool
    probe: list[str]  # the liveness probe's exec command

    @classmethod
    def of(cls, manifest: Path) -> DriverPod:
        spec = yaml.safe_load(manifest.read_text())["spec"]
        container, = spec["driver"]["template"]["spec"]["containers"]
        volumes = {volume["name"]: volume for volume in spec["driver"]["template"]["spec"]["volumes"]}
        mounts = [mount for mount in container["volumeMounts"] if "configMap" in volumes[mount["name"]]]
        assert len(mounts) == 1, f"{manifest}: the driver should mount one ConfigMap, the job file's"
        secret, = container["envFrom"]
        return cls(main_file=spec["mainApplicationFile"], arguments=spec["arguments"],
                   packages=spec["deps"]["packages"],
                   env={variable["name"]: variable["value"] for variable in spec["driver"]["env"]},
                   job_file_directory=mounts[0]["mountPath"], secret_optional=secret["secretRef"]["optional"],
                   probe=container["livenessProbe"]["exec"]["command"])


def config_map(directory: Path, settings: dict[str, str]) -> Path:
    """A directory holding job.toml as `kubectl create configmap --from-file=job.toml` would mount
    it: readable by the image's user (uid 185), not writable."""
    directory.mkdir()
    write_job_file(directory / "job.toml", settings).chmod(0o644)
    directory.chmod(0o755)
    return directory


def in_container(image: JobImage, container: str, command: list[str]) -> subprocess.CompletedProcess:
    """`command` in the running container, as the kubelet runs an exec probe (the container's user,
    working directory and environment)."""
    return subprocess.run(image.command("exec", container, *command), capture_output=True, text=True, timeout=120)


def test_the_manifests_driver_counts_exactly_once_and_its_probe_reads_the_job_file(
        image, job: JobUnderTest, s3_server, s3a_jars, monkeypatch, tmp_path):
    """The driver as the Spark operator starts it from the manifest (`<image> driver ...
    <mainApplicationFile> <arguments>`), on the host's network (Kafka and S3 listen on loopback),
    with the S3A jars mounted as a node would have them; the probe exec'd in its container while
    it runs, then in a container on a checkpoint that input waits for and no batch ever reached."""
    pod = DriverPod.of(MANIFEST)
    assert KAFKA_CONNECTOR in pod.packages and pod.secret_optional
    job.guarantee = "exactly-once"
    job.options.update(on_s3(job, s3_server, monkeypatch))
    # The ConfigMap's file holds every option, the S3 secret as `${VAR}` from the Secret's variables.
    configmap = config_map(tmp_path / "configmap", job.settings())
    jars = [Path(jar) for jar in s3a_jars.split(":")]  # as baked into a node's image (HADOOP_AWS_CLASSPATH)
    mounts = [f"--volume={configmap}:{pod.job_file_directory}:ro",
              *(f"--volume={jar}:/opt/s3a/{jar.name}:ro" for jar in jars)]
    if TRUST_STORE.exists():  # Ivy reaches the repository as the host does (through a proxy's CA, say)
        mounts.append(f"--volume={TRUST_STORE}:{TRUST_STORE}:ro")
    environment = [f"--env={SECRET_VARIABLE}", *(f"--env={name}={value}" for name, value in pod.env.items())]
    container = f"{{ cookiecutter.project_slug }}-{uuid.uuid4().hex[:8]}"
    launcher = image.command(
        "run", "--rm", f"--name={container}", "--network=host", "--env=SPARK_DRIVER_BIND_ADDRESS=127.0.0.1",
        *environment, *mounts, image.tag,
        # The operator sets spark.driver.host to the driver pod's service; here the host's loopback.
        "driver", "--master", "local[2]", "--name", "{{ cookiecutter.project_slug }}", "--conf", "spark.driver.host=127.0.0.1",
        "--packages", KAFKA_CONNECTOR,
        "--conf", "spark.driver.extraClassPath=" + ":".join(f"/opt/s3a/{jar.name}" for jar in jars),
        pod.main_file)
    sample = produce_sample(job, count=3000, seed=41, partitions=4)
    log_path = job.workdir / "driver.log"
    # The manifest's arguments as they are: the job runs until it is stopped.
    driver = start_job(pod.arguments, {}, job.workdir, log_path, {SECRET_VARIABLE: s3_server.secret_key}, launcher)
    try:
        wait_until(lambda: "batch 0:" in log_path.read_text(), 900, "the first batch", interval=2,
                   alive=driver, log_path=log_path)
        healthy = in_container(image, container, pod.probe)
        assert healthy.returncode == 0, f"the liveness probe failed on a running job:\n{healthy.stdout}{healthy.stderr}"

        def drained() -> bool:
            status = in_container(image, container, [*pod.probe[:pod.probe.index("--check")], "--json"])
            assert status.returncode == 0, status.stdout + status.stderr
            return json.loads(status.stdout)["lag_total"] == 0

        wait_until(drained, 900, "the input drained", interval=5, alive=driver, log_path=log_path)
    finally:
        subprocess.run(image.command("rm", "--force", container), capture_output=True)
        driver.wait(120)
    kept, malformed = merged(sample)
    verdict = job.verify(kept, malformed)
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated, verdict.wrong_answers, verdict.missing_updates) == (0, 0, 0, 0)
    assert verdict.dead_letter_ok

    # Stuck: the job file's checkpoint has no batch while input waits (a driver that never got to
    # its first batch). The probe, as the kubelet runs it, in a container of the image.
    job.checkpoint_location += "-never-started"
    stuck_configmap = config_map(tmp_path / "configmap-stuck", job.settings())
    found = subprocess.run(image.command(
        "run", "--rm", "--network=host", *environment, f"--volume={stuck_configmap}:{pod.job_file_directory}:ro",
        image.tag, *pod.probe), capture_output=True, text=True, timeout=300,
        env={**os.environ, SECRET_VARIABLE: s3_server.secret_key})
    assert found.returncode == 1, f"the liveness probe passed a stuck job:\n{found.stdout}{found.stderr}"
    assert "stuck: input waits and no batch was ever committed" in found.stdout + found.stderr
