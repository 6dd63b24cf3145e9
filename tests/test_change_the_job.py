"""The rendered README's "Change the job", done as written on a fresh rendering of each query
shape that has one (the windowed count's README names the code to change, with no example): its
example's blocks (the schema, the query's Spark side, the model) pasted where it says, nothing
else edited; and a third answer the README names (the largest amount and the mean), with a model
of its own. The
project then type-checks, and its unit tests that read the query pass unchanged (the answer's
aggregates, the query's fingerprint and its refusals, the verdicts, the one-line failures). Its
integration and crash tests were run on such a rendering by hand; CI's time goes to the default
rendering's."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import render

# Per query shape: the example's heading, what its blocks replace in query.py, the unit tests that
# read the query or its configuration (the count's operator is not rendered for the stateless shape).
SHAPES = {
    "count-by-key": ("**Example: a sum of a field instead of a count.**",
                     '    return [agg.Count("count")]\n',
                     r"(    counts: Counter\[str\] = Counter\(\)\n.*?\n        yield [^\n]*\n)"),
    "stateless": ("**Example: publish an amount in cents.**",
                  '    return [F.col(f"`{name}`").alias(name) for name in config.schema]\n',
                  r"(    for event in events:\n        key = [^\n]*\n        yield [^\n]*\n)"),
}
# A third answer, beside the README's sum: two aggregates over the same field, one of them kept as
# two state columns (the mean). The README names its answer in prose; its model is the test's.
THIRD_ANSWER = '    return [agg.Max("amount", "largest"), agg.Mean("amount", "mean")]\n'
THIRD_MODEL = """    totals: Counter[str] = Counter()
    values: Counter[str] = Counter()
    largest: dict[str, int] = {}
    for event in events:
        key = as_key(event[config.key_field])
        totals[key] += event["amount"]
        values[key] += 1
        largest[key] = max(largest.get(key, event["amount"]), event["amount"])
        yield key, {"key": key, "largest": largest[key], "mean": totals[key] / values[key]}
"""
SHAPES["largest-and-mean"] = SHAPES["count-by-key"]
COMMON_UNIT_TESTS = ("test_query_fingerprint.py", "test_savepoint_manifest.py", "test_one_line_failures.py",
                     "test_sink_parts.py", "test_chaos_plan.py", "test_differential.py")
QUERY_UNIT_TESTS = {"count-by-key": ("test_counting.py", *COMMON_UNIT_TESTS), "stateless": COMMON_UNIT_TESTS,
                    "largest-and-mean": ("test_query_fingerprint.py", "test_savepoint_manifest.py")}
# What the changed query.py and job.toml hold, per shape.
CHANGED = {"count-by-key": ('agg.Sum("amount", "total")', 'totals[key] += event["amount"]'),
           "stateless": ('(F.col("amount") * 100).alias("cents")', '"cents": event["amount"] * 100'),
           "largest-and-mean": (THIRD_ANSWER, '"mean": totals[key] / values[key]')}


def example_blocks(readme: str, heading: str) -> list[str]:
    """The example's code blocks, in order: the job file's [schema], the query's Spark side, the model."""
    section = readme[readme.index(heading):]
    section = section[:section.index("\nA query must keep")]
    return re.findall(r"```(?:toml|python)\n(.*?)```", section, re.DOTALL)


def replace_once(text: str, old: str, new: str, where: str) -> str:
    assert text.count(old) == 1, f"{where} no longer holds the code the README's example replaces:\n{old}"
    return text.replace(old, new)


def change_as_the_readme_says(project: Path, shape: str) -> None:
    heading, spark_side, model_body = SHAPES[shape]
    readme = (project / "README.md").read_text()
    schema, spark_block, model = example_blocks(readme, heading)
    if shape == "largest-and-mean":
        assert " ".join(THIRD_ANSWER.split()).removeprefix("return ") in " ".join(readme.split()), \
            "the README no longer names the third answer"
        spark_block, model = THIRD_ANSWER, THIRD_MODEL
    job_file = project / "job.toml"
    text = job_file.read_text()
    job_file.write_text(text[:text.index("[schema]")] + schema + "\n")  # [schema] is the file's last table
    query_file = next(project.glob("src/*/pipeline/query.py"))
    text = replace_once(query_file.read_text(), spark_side, spark_block, "query.py")
    body = re.search(model_body, text, re.DOTALL)
    assert body, "query.model no longer holds the code the README's example replaces"
    query_file.write_text(text.replace(body.group(1), model))


@pytest.fixture(scope="module", params=list(SHAPES))
def changed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    shape = "count-by-key" if request.param == "largest-and-mean" else request.param
    project = render(tmp_path_factory.mktemp(f"changed-{request.param}"), query=shape)
    change_as_the_readme_says(project, request.param)
    return request.param, project


def run(project: Path, python: Path, *command: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{project}/src:{project}/tools/src:{project}/tests"}
    return subprocess.run([str(python), *command], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def test_the_change_is_the_readmes(changed: tuple[str, Path]) -> None:
    shape, project = changed
    assert 'amount = "int"' in (project / "job.toml").read_text()
    query = next(project.glob("src/*/pipeline/query.py")).read_text()
    assert all(code in query for code in CHANGED[shape]), query


def test_the_changed_job_type_checks(changed: tuple[str, Path], project_python: Path) -> None:
    result = run(changed[1], project_python, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_changed_job_passes_its_unit_tests(changed: tuple[str, Path], project_python: Path) -> None:
    """Among them: the fingerprint tells the sum from the count, so a state TTL, a savepoint and
    `state` refuse it; the commands that reach Kafka or S3 still fail in one line."""
    shape, project = changed
    result = run(project, project_python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 *(f"tests/unit/{name}" for name in QUERY_UNIT_TESTS[shape]))
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and not re.search(r"\d+ skipped", result.stdout), result.stdout[-3000:]
