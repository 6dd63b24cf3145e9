"""A container engine for testcontainers where none answers: Podman's Docker-API service.

On machines with Docker this module does nothing. On a bare Linux machine (root, apt, no
Docker daemon) it installs Podman, configures it for a machine without systemd, and serves
its Docker-compatible API on a private socket for the duration of a `with` block.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .containers import docker_engine_answers
from .process import cache_root
from .unavailable import KafkaUnavailable

# Debian's defaults fail here: crun cannot start containers, the default nofile/nproc
# ulimits are refused, and there is no systemd to manage cgroups.
CONTAINERS_CONF = """\
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
"""
PACKAGES = ("podman", "runc")
_apt_updated = False

Log = Callable[[str], None]


def apt_install(packages: list[str] | tuple[str, ...], log: Log = print) -> None:
    """apt-get install the packages (root, Debian/Ubuntu only); `apt-get update` once per process."""
    global _apt_updated
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise KafkaUnavailable(
            f"no container engine answers and {' '.join(packages)} cannot be installed automatically "
            f"(that needs root and apt-get). Start Docker, or install them: apt-get install {' '.join(packages)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    started = time.monotonic()
    log(f"kafka: installing {' '.join(packages)} with apt-get")
    steps = [] if _apt_updated else [["apt-get", "update", "-q"]]
    for command in [*steps, ["apt-get", "install", "-y", "-q", *packages]]:
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise KafkaUnavailable(
                f"'{' '.join(command)}' failed:\n{(result.stdout + result.stderr)[-2000:]}"
            )
        _apt_updated = _apt_updated or command[1] == "update"
    log(f"kafka: installed {' '.join(packages)} in {time.monotonic() - started:.1f}s")


def _die_with_parent() -> None:
    """Runs in the child: the kernel sends it SIGTERM when the test session dies, even by SIGKILL."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _ping(docker_host: str) -> bool:
    import docker

    try:
        client = docker.DockerClient(base_url=docker_host, timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - not answering yet
        return False


def engine_command() -> str:
    """The command-line client of the engine that answers: podman where container_engine() serves
    Podman's API (CONTAINERS_CONF set) or no docker client is installed, else docker."""
    if "CONTAINERS_CONF" in os.environ or shutil.which("docker") is None:
        return "podman"
    return "docker"


@contextmanager
def container_engine(log: Log = print, timeout: float = 30.0) -> Iterator[str | None]:
    """Yield DOCKER_HOST of a working engine: None if one already answers, else a Podman service.

    Sets the testcontainers variables in os.environ while the block runs and restores them after.
    """
    if docker_engine_answers():
        yield None
        return
    missing = [tool for tool in PACKAGES if shutil.which(tool) is None]
    if missing:
        apt_install(PACKAGES, log)
    cache = cache_root() / "podman"
    cache.mkdir(parents=True, exist_ok=True)
    conf = cache / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    # One socket per session, so concurrent sessions each stop only their own service.
    socket = cache / f"podman-{os.getpid()}.sock"
    socket.unlink(missing_ok=True)
    docker_host = f"unix://{socket}"
    settings = {
        "CONTAINERS_CONF": str(conf),
        "DOCKER_HOST": docker_host,
        "TESTCONTAINERS_RYUK_DISABLED": "true",  # the reaper image cannot be pulled
        # Otherwise testcontainers guesses it runs inside a container and reads fields Podman omits.
        "TESTCONTAINERS_CONNECTION_MODE": "docker_host",
        "TESTCONTAINERS_HOST_OVERRIDE": "127.0.0.1",
    }
    saved = {name: os.environ.get(name) for name in settings}
    with open(cache / "service.log", "ab") as service_log:
        service = subprocess.Popen(
            [shutil.which("podman") or "podman", "system", "service", "--time=0", docker_host],
            env={**os.environ, **settings}, stdout=service_log, stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
    try:
        deadline = time.monotonic() + timeout
        while not _ping(docker_host):
            if service.poll() is not None or time.monotonic() > deadline:
                raise KafkaUnavailable(
                    f"the Podman API service did not answer on {socket} (log: {service_log.name})"
                )
            time.sleep(0.2)
        os.environ.update(settings)
        log(f"kafka: container engine is Podman's API service at {docker_host} (pid {service.pid})")
        yield docker_host
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if service.poll() is None:
            service.terminate()
            try:
                service.wait(15)
            except subprocess.TimeoutExpired:
                service.kill()
                service.wait()
        socket.unlink(missing_ok=True)
