"""Every combination of the options that change files: delivery guarantee x GitHub Actions x
deployment files x checkpoint on S3 or a local path (16 renderings). Each is checked for template
leftovers, its file set, parsing deploy/CI files and ruff. The options that only add or remove
files (workflow, deployment) leave src/ and tests/ byte-identical, which a test below proves, so the
rendered unit tests run for the renderings that change what the defaults do: one with every name
and answer changed (at-least-once, the checkpoint on S3) and the other query shapes; the default
rendering (exactly-once, local) runs its whole suite in test_rendered_suite.py. 3 runs, side by
side, in one shared venv with PYTHONPATH=<rendering>/src and its tools/src."""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import has_template_markers, render, rendering_env
from cpu_accounts import Account, machine_seconds, per_test, plugin_env, table

GUARANTEES = ("exactly-once", "at-least-once")
YES_NO = ("yes", "no")
CHECKPOINTS = {"local": "checkpoints", "s3": "s3://color-counts-bucket/checkpoints"}
CELLS = {
    f"{guarantee}-gha_{gha}-deploy_{deploy}-ckpt_{ckpt}": {
        "delivery_guarantee": guarantee,
        "include_github_actions": gha,
        "include_deployment": deploy,
        "checkpoint_location": CHECKPOINTS[ckpt],
    }
    for guarantee, gha, deploy, ckpt in itertools.product(GUARANTEES, YES_NO, YES_NO, CHECKPOINTS)
}
# Every name and number changed from its default: catches a default hard-coded in the template.
CUSTOM = {
    "project_name": "Tally Kinds",
    "project_slug": "tally-kinds",
    "package_name": "tally",
    "input_topic": "shop.orders",
    "output_topic": "shop.kind-counts",
    "dead_letter_topic": "shop.orders.dlq",
    "marker_topic": "shop.tally-markers",
    "key_field": "kind",
    "filter_expression": "kind IS NOT NULL AND kind NOT IN ('test', 'internal')",
    "trigger_interval_seconds": "0.5",
    "state_ttl_seconds": "3600",
    "transactional_id_prefix": "tally-tx",
    "delivery_guarantee": "at-least-once",
    "checkpoint_location": "s3://tally-bucket/tally/checkpoints",
    "license": "MIT",
}
# The answers that change what the job does, all changed, with a checkpoint the job can write here:
# its integration smoke test must pass as it does for the defaults (expectations follow the answers).
# The key field is another one again, and the filter the template's default: built from the key field.
SMOKE = {**{k: v for k, v in CUSTOM.items() if k != "filter_expression"}, "key_field": "user_id",
         "checkpoint_location": "checkpoints"}
# The other query shapes, and Avro and Protobuf values: what they render differently (pipeline/, job.toml,
# config.py, the README's description, "Change the job" and quick start) must pass their unit
# tests as the count's does.
UNIT_TEST_CELLS = {"custom-names": CUSTOM, "stateless": {"query": "stateless"},
                   "windowed-count": {"query": "windowed-count"}, "avro": {"value_format": "avro"},
                   "protobuf": {"value_format": "protobuf"}}
# A checkpoint on neither a local path nor S3: its files checked (no S3 connector in the manifest).
EXTRA_CELLS = {**UNIT_TEST_CELLS, "hdfs-checkpoint": {"checkpoint_location": "hdfs://namenode:8020/x/checkpoints"}}
# Unit tests that no answer but the names changes, each a JVM or a process of its own (Spark's jar
# resolution and the class archive, a spark-submit of the job, a broker container's settings): the
# default rendering's suite and the custom-names cell run them, the query shapes' cells do not.
ANSWER_FREE_UNIT_TESTS = ("tests/unit/test_resolved_jars.py",
                          "tests/unit/test_session.py::test_spark_submit_runs_the_job_on_the_master_it_was_given",
                          "tests/unit/test_kafka_image.py::test_a_container_node_gets_the_process_nodes_configuration")
WORKFLOW = ".github/workflows/ci.yml"
DEPLOY_FILES = {"deploy/spark-submit.sh", "deploy/main.py", "deploy/resolve.py", "deploy/k8s/spark-application.yaml", "deploy/k8s/alerts.yaml",
                "deploy/k8s/pod-monitor.yaml", "deploy/image/Dockerfile", "deploy/image/entrypoint.sh",
                # the cluster tests submit through deploy/ and build its image
                "tests/cluster/conftest.py", "tests/cluster/test_cluster.py", "tests/cluster/test_image.py",
                "tests/unit/test_spark_submit.py"}


@pytest.fixture(scope="module")
def renderings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("matrix")
    return {name: render(root / name, **answers) for name, answers in {**CELLS, **EXTRA_CELLS}.items()}


def files(root: Path, under: str = "") -> set[str]:
    return {str(path.relative_to(root)) for path in (root / under).rglob("*") if path.is_file()}


@pytest.mark.parametrize("cell", [*CELLS, *EXTRA_CELLS])
def test_rendering_is_complete_and_clean(cell: str, renderings: dict[str, Path]) -> None:
    project = renderings[cell]
    answers = {**CELLS.get(cell, {}), **EXTRA_CELLS.get(cell, {})}
    rendered = files(project)

    leftovers = [name for name in rendered if has_template_markers(name, (project / name).read_text(errors="replace"))]
    assert not leftovers, f"template markers left in {leftovers}"

    assert (WORKFLOW in rendered) == (answers.get("include_github_actions", "yes") == "yes")
    present = DEPLOY_FILES & rendered
    assert present == (DEPLOY_FILES if answers.get("include_deployment", "yes") == "yes" else set())
    assert not (project / ".github").exists() or WORKFLOW in rendered, "no empty .github/ left behind"

    recorded = json.loads((project / ".cookiecutter.json").read_text())
    assert {key: recorded[key] for key in answers} == answers

    license_answer = answers.get("license", "Apache-2.0")
    assert {"Apache-2.0": "Apache License", "MIT": "MIT License"}[license_answer] in (project / "LICENSE").read_text()
    assert tomllib.loads((project / "pyproject.toml").read_text())["project"]["license"] == license_answer

    if WORKFLOW in rendered:
        assert "${{ github.ref }}" in (project / WORKFLOW).read_text(), "GitHub expressions must stay literal"
        workflow = yaml.safe_load((project / WORKFLOW).read_text())
        assert workflow[True]["push"] == {"branches": ["main"]} and "pull_request" in workflow[True]  # YAML's `on`
        assert any(step.get("run") == "make lint" for step in workflow["jobs"]["lint"]["steps"])
        assert workflow["jobs"]["test"]["strategy"]["matrix"]["python-version"] == ["3.11", "3.12"]
        steps = workflow["jobs"]["test"]["steps"]
        assert {"actions/setup-python@v5", "actions/setup-java@v4"} <= {step.get("uses") for step in steps}
        assert any(step.get("run") == "make test" and step["env"]["KAFKA_PROVIDER"] == "testcontainers"
                   for step in steps)
    if present:
        script = project / "deploy/spark-submit.sh"
        assert os.access(script, os.X_OK)
        subprocess.run(["bash", "-n", str(script)], check=True)
        manifest = yaml.safe_load((project / "deploy/k8s/spark-application.yaml").read_text())
        assert manifest["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
        assert manifest["kind"] == "SparkApplication"
        # The job file decides: job.toml from a ConfigMap; the environment names the master alone. A
        # local checkpoint answer will be set to S3 there, most likely: the S3 connector comes along.
        checkpoints = answers.get("checkpoint_location", "checkpoints")  # the template's default where a cell keeps it
        local = not checkpoints.startswith(("s3:", "s3a:", "hdfs:", "gs:", "abfs:", "abfss:"))
        s3 = local or checkpoints.startswith("s3:")
        env = [item["name"] for item in manifest["spec"]["driver"]["env"]]
        assert len(env) == 1 and env[0].endswith("_SPARK_MASTER"), env
        assert manifest["spec"]["arguments"] == ["run", "--config", f"/etc/{project.name}/job.toml"]
        template = manifest["spec"]["driver"]["template"]["spec"]
        assert template["volumes"][0]["configMap"]["name"] == f"{project.name}-job"
        assert template["containers"][0]["volumeMounts"][0]["mountPath"] == f"/etc/{project.name}"
        assert "hadoop-aws" in script.read_text()  # chosen at run time, by the checkpoint location
        packages = manifest["spec"]["deps"]["packages"]
        assert packages[0].startswith("org.apache.spark:spark-sql-kafka-0-10_2.13:")
        assert any(p.startswith("org.apache.hadoop:hadoop-aws:") for p in packages) == s3
        driver = manifest["spec"]["driver"]
        probe = driver["template"]["spec"]["containers"][0]["livenessProbe"]["exec"]["command"]
        package = next((project / "src").glob("*/observability/metrics.py")).parent.parent
        # The probe reads the job's own file, the one the arguments give (the image holds another).
        assert probe[1:6] == ["-m", package.name, "status", *manifest["spec"]["arguments"][1:]]
        assert "--check" in probe
        metrics_code = (package / "observability" / "metrics.py").read_text()
        assert driver["ports"][0]["containerPort"] == 9464
        assert "metrics_port: int = option(9464," in (package / "config.py").read_text()
        rules = yaml.safe_load((project / "deploy/k8s/alerts.yaml").read_text())["spec"]["groups"][0]["rules"]
        for rule in rules:  # every series an alert reads is one the job exports
            for name in re.findall(r"\beos_\w+", rule["expr"]):
                assert f'"{name.removesuffix("_total")}"' in metrics_code, (rule["alert"], name)
        assert any(rule["expr"].startswith("absent(") for rule in rules), "no alert when the metrics vanish"
        monitor = yaml.safe_load((project / "deploy/k8s/pod-monitor.yaml").read_text())
        assert monitor["kind"] == "PodMonitor"
        assert monitor["spec"]["selector"]["matchLabels"]["sparkoperator.k8s.io/app-name"] == manifest["metadata"]["name"]
        assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == driver["ports"][0]["name"]

    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=project,
                          capture_output=True, text=True, check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_file_options_leave_the_code_identical(renderings: dict[str, Path]) -> None:
    """Why the unit tests need not run for every cell: the file options only prune files."""
    for guarantee, ckpt in itertools.product(GUARANTEES, CHECKPOINTS):
        group = [renderings[f"{guarantee}-gha_{gha}-deploy_{deploy}-ckpt_{ckpt}"]
                 for gha, deploy in itertools.product(YES_NO, YES_NO)]
        for under in ("src", "tests"):
            contents = [{name: (p / name).read_bytes() for name in files(p, under) if name not in DEPLOY_FILES}
                        for p in group]
            assert all(content == contents[0] for content in contents), f"{under}/ differs for {guarantee}/{ckpt}"


def test_the_manifest_matches_the_pinned_spark(renderings: dict[str, Path], project_python: Path) -> None:
    """The manifest names Spark's and Hadoop's versions; they must be those of the pinned pyspark."""
    code = "import os, pyspark; print(pyspark.__version__); print(*os.listdir(pyspark.__path__[0] + '/jars'))"
    probe = subprocess.run([str(project_python), "-c", code], capture_output=True, text=True, check=True)
    lines = probe.stdout.split("\n")
    spark_version, jars = lines[0], lines[1].split()
    hadoop = next(jar[len("hadoop-client-api-"):-len(".jar")] for jar in jars if jar.startswith("hadoop-client-api-"))
    pyproject = tomllib.loads((renderings["custom-names"] / "pyproject.toml").read_text())
    assert f"pyspark=={spark_version}" in pyproject["project"]["dependencies"]
    manifest = yaml.safe_load((renderings["exactly-once-gha_yes-deploy_yes-ckpt_s3"]
                               / "deploy/k8s/spark-application.yaml").read_text())
    assert manifest["spec"]["sparkVersion"] == spark_version
    assert manifest["spec"]["deps"]["packages"] == [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version}",
                                                    f"org.apache.hadoop:hadoop-aws:{hadoop}"]


@pytest.fixture(scope="module")
def unit_test_runs(renderings: dict[str, Path], project_python: Path,
                   request: pytest.FixtureRequest) -> Iterator[dict[str, tuple[int, str]]]:
    """The cells' unit tests run side by side: each spends much of its time waiting on a JVM or a
    child process, so three at once take about half the time of three in a row on two cores.
    Each writes to a file, not a pipe, so a long failure report cannot block it; each is charged
    to a CPU account of its own (cpu_accounts.py), and the table of their costs is printed."""
    runs, accounts, walls = {}, {}, {}
    cpu_log = next(iter(renderings.values())).parent / "cpu-per-test.jsonl"
    machine_at_start, started = machine_seconds(), time.monotonic()
    for cell in UNIT_TEST_CELLS:
        project = renderings[cell]
        log = project.parent / f"{cell}-unit-tests.log"
        accounts[cell] = account = Account.new(f"matrix-{cell}")
        skipped = [] if cell == "custom-names" else [f"--deselect={name}" for name in ANSWER_FREE_UNIT_TESTS]
        argv = [str(project_python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *skipped, "tests/unit"]
        with log.open("w") as out:
            runs[cell] = (log, subprocess.Popen(
                argv if account is None else account.charged(argv), cwd=project,
                env=plugin_env(rendering_env(project), cpu_log, f"matrix: {cell}", account),
                stdout=out, stderr=subprocess.STDOUT,
            ))
    results = {}
    while len(results) < len(runs):  # each cell's wall-clock time is its own: polled, not waited on in turn
        for cell, (log, run) in runs.items():
            if cell not in results and run.poll() is not None:
                results[cell], walls[cell] = (run.returncode, log.read_text()), time.monotonic() - started
        time.sleep(0.5)
    lanes = {f"matrix: {cell}": (walls[cell], None if account is None else account.seconds())
             for cell, account in accounts.items()}
    costs = table(lanes, machine_seconds() - machine_at_start, None, per_test(cpu_log), top=15)
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(f"\n=== where the matrix cells' unit tests' time went (CPU from each cell's cgroup):\n{costs}", flush=True)
    yield results
    for account in accounts.values():
        if account is not None:
            account.remove()


@pytest.mark.parametrize("cell", list(UNIT_TEST_CELLS))
def test_rendered_unit_tests_pass(cell: str, unit_test_runs: dict[str, tuple[int, str]]) -> None:
    returncode, output = unit_test_runs[cell]
    assert returncode == 0, output[-9000:]


def test_a_rendering_with_every_answer_changed_passes_its_pipeline_smoke_test(
    tmp_path: Path, project_python: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One pipeline run on a real Kafka (the rendered tests provide it, as in `make test`), checked
    by the independent reader: other key field (the default filter follows it), topics, guarantee and TTL."""
    project = render(tmp_path, **SMOKE)
    with capsys.disabled():
        print(f"\n=== smoke test of a rendering with every answer changed: {project}", flush=True)
    result = subprocess.run(
        [str(project_python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/integration/test_pipeline.py::test_counts_over_several_partitions_are_exact"],
        cwd=project, env=rendering_env(project), capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout, result.stdout[-3000:]


# What a team decides, the whole of each shape's query.py: no plumbing of the pipeline's in it.
TEAMS_DECISIONS = {"keep", "route", "answer", "project", "model", "as_key"}
PLUMBING = {"IS_EVENT", "where_in_place", "columns_read", "Changes", "DataFrame", "changes", "keep_matching"}


@pytest.mark.parametrize("cell", ["exactly-once-gha_yes-deploy_yes-ckpt_local", "stateless", "windowed-count"])
def test_query_py_holds_the_teams_decisions_alone(cell: str, renderings: dict[str, Path]) -> None:
    """Dead letters past the filter, the columns carried and the operator are steps.py's: a team
    editing query.py cannot remove them (the count's rendering, then the other shapes')."""
    tree = ast.parse(next(renderings[cell].glob("src/*/pipeline/query.py")).read_text())
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert functions <= TEAMS_DECISIONS and "keep" in functions and "model" in functions, functions
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert not (names | imported) & PLUMBING, sorted((names | imported) & PLUMBING)
