"""The rendered Kubernetes manifests (deploy/k8s/) against the schemas of the custom resources they
create: the Spark operator's SparkApplication, the Prometheus operator's PodMonitor and
PrometheusRule. They are checked as the API server checks them (types, required fields, enums),
and more strictly: a field the schema does not know fails here, where the API server would drop it
without a word. The schemas are vendored in crd_schemas/ (both operators are Apache-2.0; each file
names the module version it came from; crd_schemas/refresh.py writes them for other versions)."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import render
from jsonschema import Draft4Validator

SCHEMAS = Path(__file__).with_name("crd_schemas")
ANSWERS = {  # where the manifest's checkpoint and packages differ
    "local-checkpoint": {},
    "s3-checkpoint": {"checkpoint_location": "s3://color-counts-bucket/checkpoints"},
    "custom-names": {"project_slug": "tally-kinds", "package_name": "tally",
                     "checkpoint_location": "hdfs://namenode:8020/tally/checkpoints"},
}


def strict(schema: Any) -> Any:
    """The schema with unknown fields refused wherever Kubernetes would prune them: every object
    with `properties` and neither `additionalProperties` nor x-kubernetes-preserve-unknown-fields."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict(value) for key, value in schema.items()}
    if ("properties" in result and "additionalProperties" not in result
            and not result.get("x-kubernetes-preserve-unknown-fields")):
        result["additionalProperties"] = False
    return result


def load_validators() -> dict[tuple[str, str], Draft4Validator]:
    validators = {}
    for path in SCHEMAS.glob("*.json.gz"):
        crd = json.loads(gzip.decompress(path.read_bytes()))
        schema = strict(crd["openAPIV3Schema"])
        schema["properties"]["metadata"] = {"type": "object", "required": ["name"]}
        validators[(f"{crd['group']}/{crd['version']}", crd["kind"])] = Draft4Validator(schema)
    return validators


VALIDATORS = load_validators()


def errors(document: dict[str, Any]) -> list[str]:
    validator = VALIDATORS.get((document.get("apiVersion", ""), document.get("kind", "")))
    assert validator is not None, f"no vendored schema for {document.get('apiVersion')} {document.get('kind')}"
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(document)]


def manifests(project: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted((project / "deploy/k8s").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            found[f"{path.name}:{document['kind']}"] = document
    return found


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("manifests")
    return {name: render(root / name, **answers) for name, answers in ANSWERS.items()}


def test_the_vendored_schemas_cover_what_the_manifests_create(projects: dict[str, Path]) -> None:
    kinds = {(doc["apiVersion"], doc["kind"]) for doc in manifests(projects["local-checkpoint"]).values()}
    assert kinds == {("sparkoperator.k8s.io/v1beta2", "SparkApplication"), ("monitoring.coreos.com/v1", "PodMonitor"),
                     ("monitoring.coreos.com/v1", "PrometheusRule")}
    assert kinds <= set(VALIDATORS)


@pytest.mark.parametrize("answers", ANSWERS)
def test_every_manifest_is_valid_for_its_custom_resource(answers: str, projects: dict[str, Path]) -> None:
    for name, document in manifests(projects[answers]).items():
        assert errors(document) == [], name


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = document
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value
    return change


# What a hand edit gets wrong, and the error each must give: the check has teeth.
MISTAKES = {
    "a misspelt field": ("spark-application.yaml:SparkApplication",
                         _set("spec.restartPolicy.onFailureRetryIntervall", 30), "Additional properties"),
    "a number as a string": ("spark-application.yaml:SparkApplication", _set("spec.driver.cores", "one"),
                             "is not of type 'integer'"),
    "a value out of its enum": ("spark-application.yaml:SparkApplication", _set("spec.mode", "local"),
                                "is not one of"),
    "a probe field in the wrong place": ("spark-application.yaml:SparkApplication",
                                         _set("spec.driver.livenessProbe", {"exec": {"command": ["true"]}}),
                                         "Additional properties"),
    "an interval Prometheus cannot parse": ("pod-monitor.yaml:PodMonitor",
                                            _set("spec.podMetricsEndpoints.0.interval", "30 seconds"),
                                            "does not match"),
    "a rule without its expression": ("alerts.yaml:PrometheusRule",
                                      lambda doc: doc["spec"]["groups"][0]["rules"][0].pop("expr"),
                                      "'expr' is a required property"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_broken_manifest_fails_the_check(mistake: str, projects: dict[str, Path]) -> None:
    name, change, message = MISTAKES[mistake]
    document = copy.deepcopy(manifests(projects["local-checkpoint"])[name])
    change(document)
    found = errors(document)
    assert any(message in error for error in found), found
