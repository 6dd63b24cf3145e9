"""The import graph: the job and its tooling wing stay apart (the job's modules never import
`devtools`, which spark-submit.sh leaves out of the shipped zip); the sink is a sink of Kafka
records that knows nothing of the aggregation; the light commands never import PySpark."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import {{ cookiecutter.package_name }}

PACKAGE_DIR = Path({{ cookiecutter.package_name }}.__file__).parent
# What the sink must not know: the query and its aggregation (it stages and produces bytes).
PIPELINE_MODULES = ("job", "parsing", "counting", "ttl_counting", "dead_letters", "output_records")
# Commands that only read the configuration or the checkpoint: they must start fast.
LIGHT_COMMANDS = ("config",)


def _job_modules() -> list[Path]:
    return [p for p in PACKAGE_DIR.rglob("*.py") if "devtools" not in p.relative_to(PACKAGE_DIR).parts]


def _imports(tree: ast.AST, top_level_only: bool) -> list[str]:
    nodes = tree.body if top_level_only and isinstance(tree, ast.Module) else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            found.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def test_the_job_never_imports_the_tooling_wing() -> None:
    offenders = {}
    for path in _job_modules():
        # The CLI reaches the tools (demo, chaos, bench, kafka up) inside their commands only.
        imports = _imports(ast.parse(path.read_text()), top_level_only=path.name == "cli.py")
        if bad := [name for name in imports if "devtools" in name]:
            offenders[str(path.relative_to(PACKAGE_DIR))] = bad
    assert not offenders, offenders


def test_the_sink_imports_nothing_of_the_pipeline() -> None:
    offenders = {}
    for path in (PACKAGE_DIR / "sink").glob("*.py"):
        imported = [name.lstrip(".").split(".")[0] for name in _imports(ast.parse(path.read_text()), False)]
        if bad := sorted(set(imported) & set(PIPELINE_MODULES)):
            offenders[path.name] = bad
    assert not offenders, offenders


def test_the_config_command_imports_neither_pyspark_nor_the_kafka_client(tmp_path: Path) -> None:
    for command in LIGHT_COMMANDS:
        code = (f"import sys; from {{ cookiecutter.package_name }}.cli import main; main([{command!r}]); "
                "print(sorted(m for m in ('pyspark', 'py4j', 'confluent_kafka') if m in sys.modules))")
        env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)}  # this package, whatever is installed
        result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                                check=True)
        assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout


def test_the_job_runs_without_its_tooling_wing(tmp_path: Path) -> None:
    """What spark-submit.sh ships (the package without devtools/) must start: its CLI once
    built its parser from the tools' modules, and every submission failed on the import."""
    import shutil

    shipped = tmp_path / "shipped"
    shutil.copytree(PACKAGE_DIR, shipped / PACKAGE_DIR.name,
                    ignore=shutil.ignore_patterns("devtools", "__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(shipped)}
    command = [sys.executable, "-m", PACKAGE_DIR.name]
    result = subprocess.run([*command, "config"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    listed = subprocess.run([*command, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    usage = "usage: {{ cookiecutter.package_name }} [-h] {run,status,savepoint,state,topics,config}"
    assert listed.stdout.startswith(usage), listed.stdout
