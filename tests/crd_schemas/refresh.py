"""Write the vendored CRD schemas the manifest tests validate against (test_manifests.py): the
`openAPIV3Schema` of each custom resource the rendered deploy/k8s/ creates, one gzipped JSON file
per kind and version, with the module version it came from. The CRDs come with the operators' Go
modules, fetched by the Go toolchain from its module proxy (needs `go`; run it by hand when an
operator version is bumped, then run the tests):

    python3 tests/crd_schemas/refresh.py --spark-operator v2.3.0 --prometheus-operator v0.85.0
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).parent
# (Go module, path of the CRD inside it) per operator option.
CRDS = {
    "spark_operator": ("github.com/kubeflow/spark-operator/v2",
                       ["config/crd/bases/sparkoperator.k8s.io_sparkapplications.yaml"]),
    "prometheus_operator": ("github.com/prometheus-operator/prometheus-operator",
                            ["example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
                             "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"]),
}


def module_dir(module: str, version: str, cache: Path) -> Path:
    env = {"GOMODCACHE": str(cache), "GOFLAGS": "-mod=mod"}
    out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True,
                         env={**os.environ, **env}, check=False)
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "Dir" not in info:
        raise SystemExit(f"go mod download {module}@{version} failed: {info.get('Error') or out.stderr.strip()}")
    return Path(info["Dir"])


def write_schemas(crd_path: Path, source: str) -> None:
    spec = yaml.safe_load(crd_path.read_text())["spec"]
    for version in spec["versions"]:
        name = f"{spec['group']}_{version['name']}_{spec['names']['kind']}.json.gz"
        data = {"group": spec["group"], "version": version["name"], "kind": spec["names"]["kind"], "source": source,
                "openAPIV3Schema": version["schema"]["openAPIV3Schema"]}
        with gzip.GzipFile(HERE / name, "wb", mtime=0) as out:  # mtime 0: the same CRD gives the same bytes
            out.write(json.dumps(data, separators=(",", ":"), sort_keys=True).encode())
        print(f"{name}: from {source}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spark-operator", required=True, metavar="VERSION", help="e.g. v2.3.0")
    parser.add_argument("--prometheus-operator", required=True, metavar="VERSION", help="e.g. v0.85.0")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        for option, (module, paths) in CRDS.items():
            version = getattr(args, option)
            directory = module_dir(module, version, Path(cache))
            for path in paths:
                write_schemas(directory / path, f"{module}@{version} {path}")
        subprocess.run(["chmod", "-R", "u+w", cache], check=False)  # the module cache is read-only


if __name__ == "__main__":
    main()
