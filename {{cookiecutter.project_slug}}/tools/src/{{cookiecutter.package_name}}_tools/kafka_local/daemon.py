"""`kafka up [--brokers 3]` / `kafka down`: a local broker, or a three-broker cluster
(cluster.py), that outlives the command, for the demo and for development. Its state (each
node's pid and ports) lives in a small JSON file in the work directory."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from ..processes import alive, is_our_daemon
from .cluster import LocalKafkaCluster
from .process import LocalKafkaBroker
from .unavailable import KafkaUnavailable

STATE_FILE = "broker.json"


def up(workdir: Path, brokers: int = 1) -> str:
    """Start `brokers` nodes (1, or 3 and more for a cluster) in `workdir` unless they already run
    there; return the bootstrap servers."""
    workdir.mkdir(parents=True, exist_ok=True)
    if (running := running_bootstrap(workdir)) is not None:
        print(f"kafka: already running at {running}")
        return running
    saved = _nodes(workdir)
    if saved and len(saved) != brokers:
        raise KafkaUnavailable(f"{workdir} holds the data of {len(saved)} local broker(s), not {brokers}: "
                               f"`kafka down`, then remove it or choose another --workdir")
    down(workdir)  # what is left of a cluster some of whose nodes died
    if brokers == 1:
        broker = LocalKafkaBroker(workdir)
        nodes = {1: broker}
    else:
        cluster = LocalKafkaCluster(workdir, brokers)
        nodes = cluster.nodes
    for node_id, node in nodes.items():  # reuse the ports: the KRaft quorum was formatted with them
        if old := saved.get(node_id):
            node.port, node.controller_port = old["port"], old["controller_port"]
            node.sasl_port = old.get("sasl_port", node.sasl_port)
    seconds = broker.start() if brokers == 1 else cluster.start()
    bootstrap = ",".join(node.bootstrap_servers for node in nodes.values())
    (workdir / STATE_FILE).write_text(json.dumps({
        "bootstrap_servers": bootstrap,
        "nodes": [{"node_id": node_id, "pid": node.process.pid if node.process else 0, "port": node.port,
                   "controller_port": node.controller_port, "sasl_port": node.sasl_port, "log": str(node.log_file)}
                  for node_id, node in nodes.items()],
    }))
    what = "local broker" if brokers == 1 else f"local {brokers}-broker cluster"
    logs = ", ".join(str(node.log_file) for node in nodes.values())
    print(f"kafka: {what} ready at {bootstrap} in {seconds:.1f}s (logs {logs})")
    return bootstrap


def down(workdir: Path, timeout: float = 30.0) -> bool:
    """Stop the nodes started by `up` in `workdir`; False when none was running."""
    pids = [node["pid"] for node in _nodes(workdir).values() if _is_our_broker(node["pid"])]
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in pids:
        if alive(pid):
            _signal(pid, signal.SIGKILL)
    return bool(pids)


def running_bootstrap(workdir: Path) -> str | None:
    """The bootstrap servers of what `up` started in `workdir`, if every node of it runs."""
    nodes = _nodes(workdir)
    if nodes and all(_is_our_broker(node["pid"]) for node in nodes.values()):
        return ",".join(f"127.0.0.1:{node['port']}" for node in nodes.values())
    return None


def _nodes(workdir: Path) -> dict[int, dict[str, Any]]:
    """The nodes in the state file, by node id (a state file of one broker, as `up` wrote it before
    clusters, is node 1)."""
    path = workdir / STATE_FILE
    if not path.exists():
        return {}
    state = json.loads(path.read_text())
    nodes = state.get("nodes") or [{"node_id": 1, **state}]
    return {node["node_id"]: node for node in nodes}


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
        os.killpg(pid, signum)


def _is_our_broker(pid: int) -> bool:
    """A node `up` started, running Kafka (processes.is_our_daemon)."""
    return is_our_daemon(pid, b"kafka.Kafka")
