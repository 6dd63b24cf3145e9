"""The import graph: the job and its development tools stay apart (the tools are a package of their
own, `{{ cookiecutter.package_name }}_tools`, which the job never imports and its wheel does not hold); the
job's packages are layers that import only downwards; the sink is a sink of Kafka records that
knows nothing of the aggregation, and has one face; the light commands never import PySpark."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import {{ cookiecutter.package_name }}

PACKAGE_DIR = Path({{ cookiecutter.package_name }}.__file__).parent
VERSION = {{ cookiecutter.package_name }}.__version__
# What the sink must not know: the query and its aggregation (it stages and produces bytes).
PIPELINE_MODULES = ("job", "pipeline")  # the query and its steps
# Commands that only read the configuration or the checkpoint: they must start fast.
LIGHT_COMMANDS = ("config",)
# The job's top-level modules and packages, in layers from the bottom: a module imports from its own
# layer or those below it, never from one above. `__init__` is the package itself (its version).
LAYERS = (
    ("__init__", "failures", "identifiers", "java_client", "waiting"),
    ("config", "masking"),
    ("observability",),  # logs and metrics, which every layer above may use
    ("storage", "kafka", "spark", "formats"),
    ("pipeline", "sink"),
    ("savepoints",),
    ("operations",),  # status
    ("startup",),
    ("supervision",),
    ("job",),
    ("cli", "__main__"),
)
# Of one layer, yet neither imports the other.
APART = (("pipeline", "sink"),)
TOP_LEVEL_MODULES_AT_MOST = 10
# Outside the sink, the job and its tools import the names of its face (sink/__init__.py), never
# a module beside it; but the commit micro-benchmark, which times the sink's stages one by one.
SINK_INSIDES_READ_BY = ("bench/microbench.py",)


TOOLS = "{{ cookiecutter.package_name }}_tools"


def _job_modules() -> list[Path]:
    return list(PACKAGE_DIR.rglob("*.py"))


def _imports(tree: ast.AST, top_level_only: bool) -> list[str]:
    nodes = tree.body if top_level_only and isinstance(tree, ast.Module) else list(ast.walk(tree))
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            found.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def test_the_job_never_imports_the_tools() -> None:
    offenders = {}
    for path in _job_modules():
        imports = _imports(ast.parse(path.read_text()), top_level_only=False)
        if bad := [name for name in imports if name.split(".")[0] == TOOLS]:
            offenders[str(path.relative_to(PACKAGE_DIR))] = bad
    assert not offenders, offenders


def test_the_jobs_wheel_holds_the_job_alone(tmp_path: Path) -> None:
    """`pip wheel .` of the project: the job's package and nothing of the tools."""
    import zipfile

    project = PACKAGE_DIR.parent.parent
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(project)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert packages == {PACKAGE_DIR.name}, packages
    assert not [name for name in names if "tools" in name.split("/")[0] or "kafka_local" in name], names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"\nVersion: {VERSION}\n" in metadata and "\nLicense-Expression: " in metadata, metadata[:500]
    assert any(name.endswith("/LICENSE") for name in names), names


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the job's modules it imports (at any depth of its code), relative imports resolved."""
    modules = {_module_name(path): path for path in _job_modules()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                for alias in node.names:
                    targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def test_the_jobs_import_graph_has_no_cycle() -> None:
    graph = _import_graph()
    assert len(graph) > 20 and f"{PACKAGE_DIR.name}.sink.coordinator" in graph[f"{PACKAGE_DIR.name}.sink.kafka_sink"]
    visiting: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> None:
        if module in done:
            return
        assert module not in visiting, "import cycle: " + " -> ".join([*visiting[visiting.index(module):], module])
        visiting.append(module)
        for target in sorted(graph[module]):
            visit(target)
        visiting.pop()
        done.add(module)

    for module in sorted(graph):
        visit(module)


def _top(module: str) -> str:
    """The top-level module or package a module of the job belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_import_points_down_the_layers() -> None:
    layer = {name: level for level, names in enumerate(LAYERS) for name in names}
    graph = _import_graph()
    unplaced = sorted({_top(module) for module in graph} - set(layer))
    assert not unplaced, f"top-level modules or packages in no layer of LAYERS: {unplaced}"
    offenders = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = _top(module), _top(target)
            if layer[high] > layer[low]:
                offenders.append(f"{module} imports {target}: {low} is below {high}")
            elif (low, high) in APART or (high, low) in APART:
                offenders.append(f"{module} imports {target}: {low} and {high} stay apart")
    assert not offenders, "\n".join(offenders)


def test_the_package_keeps_few_modules_at_its_top() -> None:
    modules = sorted(path.name for path in PACKAGE_DIR.glob("*.py"))
    assert len(modules) <= TOP_LEVEL_MODULES_AT_MOST, f"{len(modules)} modules at the top: {modules}"


def test_the_sink_imports_nothing_of_the_pipeline() -> None:
    offenders = {}
    for path in (PACKAGE_DIR / "sink").glob("*.py"):
        imported = [name.lstrip(".").split(".")[0] for name in _imports(ast.parse(path.read_text()), False)]
        if bad := sorted(set(imported) & set(PIPELINE_MODULES)):
            offenders[path.name] = bad
    assert not offenders, offenders


def _absolute_imports(path: Path, package: str) -> list[tuple[str, str | None]]:
    """(module, name) for each name `path` imports from a module, and (module, None) for each
    module it imports whole; relative imports resolved from `package`, the file's own."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], *([node.module] if node.module else [])])
            found += [(base, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
    return found


def _sink_insides_imported(path: Path, package: str) -> list[str]:
    sink = f"{PACKAGE_DIR.name}.sink"
    face = set({{ cookiecutter.package_name }}.sink.__all__)
    return [f"{module}.{name}" if name else module for module, name in _absolute_imports(path, package)
            if module.startswith(f"{sink}.") or (module == sink and name not in face)]


def test_outside_the_sink_nothing_imports_its_insides() -> None:
    """The sink's face is what the rest may rely on; a change to its insides then stays inside."""
    import {{ cookiecutter.package_name }}.sink
    import {{ cookiecutter.package_name }}_tools

    tools_dir = Path({{ cookiecutter.package_name }}_tools.__file__).parent
    offenders = {}
    for path in _job_modules():
        name = _module_name(path)
        if name.split(".")[1:2] != ["sink"]:
            package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            if bad := _sink_insides_imported(path, package):
                offenders[str(path.relative_to(PACKAGE_DIR))] = bad
    for path in tools_dir.rglob("*.py"):
        relative = path.relative_to(tools_dir)
        if relative.as_posix() not in SINK_INSIDES_READ_BY:
            package = ".".join((tools_dir.name, *relative.parent.parts))
            if bad := _sink_insides_imported(path, package):
                offenders[f"{tools_dir.name}/{relative}"] = bad
    assert not offenders, offenders
    assert all(getattr({{ cookiecutter.package_name }}.sink, name) is not None for name in {{ cookiecutter.package_name }}.sink.__all__)


def test_the_config_command_imports_neither_pyspark_nor_the_kafka_client(tmp_path: Path) -> None:
    for command in LIGHT_COMMANDS:
        code = (f"import sys; from {{ cookiecutter.package_name }}.cli import main; main([{command!r}]); "
                "print(sorted(m for m in ('pyspark', 'py4j', 'confluent_kafka') if m in sys.modules))")
        env = {**os.environ, "PYTHONPATH": str(PACKAGE_DIR.parent)}  # this package, whatever is installed
        result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                                check=True)
        assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout


def test_the_job_runs_without_its_tools(tmp_path: Path) -> None:
    """What spark-submit.sh ships (the job's package alone) must start, with the tools out of reach."""
    import shutil

    shipped = tmp_path / "shipped"
    shutil.copytree(PACKAGE_DIR, shipped / PACKAGE_DIR.name, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(shipped)}
    command = [sys.executable, "-m", PACKAGE_DIR.name]
    result = subprocess.run([*command, "config"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    listed = subprocess.run([*command, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    usage = ("usage: {{ cookiecutter.package_name }} [-h] [--version] "
             "{run,status,savepoint,state,topics,avro-schema,protobuf-schema,config}")
    assert " ".join(listed.stdout.split()).startswith(usage), listed.stdout  # argparse wraps the line


def _layout_section() -> str:
    return (PACKAGE_DIR.parents[1] / "docs" / "layout.md").read_text()


def test_the_readmes_layout_names_every_module_and_folder_and_only_those() -> None:
    """A newcomer's map: every module and folder of the job, and the tools' folders and top-level
    modules, have their line in docs/layout.md; every name there exists."""
    import re

    import {{ cookiecutter.package_name }}_tools

    layout = _layout_section()
    named = set(re.findall(r"[\w.]+\.py|\w+/", layout))
    tools_dir = Path({{ cookiecutter.package_name }}_tools.__file__).parent

    def folder(path: Path) -> bool:
        return path.is_dir() and path.name != "__pycache__" and not path.name.startswith(".")

    def module(path: Path) -> bool:
        return path.name not in ("__init__.py", "__main__.py")

    wanted = {path.name for path in PACKAGE_DIR.rglob("*.py") if module(path)}
    wanted |= {f"{path.name}/" for path in PACKAGE_DIR.rglob("*") if folder(path)}
    wanted |= {path.name for path in tools_dir.glob("*.py") if module(path)}
    wanted |= {f"{path.name}/" for path in tools_dir.iterdir() if folder(path)}
    assert not wanted - named, f"not in docs/layout.md: {sorted(wanted - named)}"
    root = PACKAGE_DIR.parents[1]
    existing = {path.name + ("/" if path.is_dir() else "") for path in root.rglob("*")
                if ".venv" not in path.parts and "__pycache__" not in path.parts}
    assert not named - existing, f"docs/layout.md names what does not exist: {sorted(named - existing)}"


def test_both_command_lines_print_the_version_the_wheel_carries(capsys) -> None:
    import pytest

    from {{ cookiecutter.package_name }} import __version__
    from {{ cookiecutter.package_name }}.cli import main as job
    from {{ cookiecutter.package_name }}_tools.cli import main as tools

    for main, prog in ((job, "{{ cookiecutter.package_name }}"), (tools, "{{ cookiecutter.project_slug }}-tools")):
        with pytest.raises(SystemExit) as exited:
            main(["--version"])
        assert exited.value.code == 0 and capsys.readouterr().out.strip() == f"{prog} {__version__}"
