"""The hooks: every pre-generation rule stops cookiecutter with a message naming the question and
the rule; hostile answers are rejected or rendered safely; the post-generation hook records answers."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from conftest import TEMPLATE, load_hook, render
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter

pre_gen = load_hook("pre_gen_project")

# (question, bad answer, words of the rule the message must state)
BAD_ANSWERS = [
    ("project_name", "", "must not be empty"),
    ("project_name", "x" * 101, "at most 100 characters"),
    ("project_name", "two\nlines", "one line of printable characters"),
    ("project_name", 'The "Best" Counts', "must not contain double quotes or backslashes"),
    ("project_slug", "Color-Counts", "lower-case letters, digits and hyphens"),
    ("project_slug", "1counts", "start with a letter"),
    ("project_slug", "counts-", "not end with a hyphen"),
    ("project_slug", "../counts", "lower-case letters, digits and hyphens"),
    ("project_slug", "c" * 65, "at most 64 characters"),
    ("package_name", "Counts", "Python package name"),
    ("package_name", "1counts", "not starting with a digit"),
    ("package_name", "color-counts", "Python package name"),
    ("package_name", "c" * 65, "at most 64 characters"),
    ("package_name", "class", "must not be a Python keyword"),
    ("package_name", "json", "standard-library module"),
    ("package_name", "pyspark", "name of a dependency"),
    ("package_name", "confluent_kafka", "name of a dependency"),
    ("package_name", "pandas", "name of a dependency"),
    ("description", "", "must not be empty"),
    ("description", "d" * 301, "at most 300 characters"),
    ("description", "tab\there", "one line of printable characters"),
    ("description", 'the "best" job', "must not contain double quotes or backslashes"),
    ("input_topic", "events!", "Kafka topic name"),
    ("output_topic", "", "Kafka topic name"),
    ("dead_letter_topic", "t" * 250, "1 to 249"),
    ("marker_topic", "..", "not '.' or '..'"),
    ("output_topic", "events", "must differ from input_topic"),
    ("marker_topic", "events", "must differ from input_topic"),
    ("dead_letter_topic", "counts", "must differ from output_topic"),
    ("key_field", "colour-name", "JSON field name"),
    ("key_field", "9lives", "not starting with a digit"),
    ("key_field", "topic", "the parse adds a column of that name"),
    ("event_time_field", "time-ms", "JSON field name"),
    ("window_seconds", "0", "above 0"),
    ("window_seconds", "1.5", "whole number of seconds"),
    ("allowed_lateness_seconds", "-5", "0 or more"),
    ("filter_expression", "", "must not be empty"),
    ("filter_expression", "  ", "must not be empty"),
    ("filter_expression", "color = 'red'\nOR true", "must be one line"),
    ("filter_expression", "color = 'red'; DROP TABLE t", "semicolon"),
    ("filter_expression", "color = 'red' -- why", "comments are not allowed"),
    ("filter_expression", "color = /* x */ 'red'", "comments are not allowed"),
    ("trigger_interval_seconds", "0", "positive number of seconds"),
    ("trigger_interval_seconds", "-1", "positive number of seconds"),
    ("trigger_interval_seconds", "two", "positive number of seconds"),
    ("trigger_interval_seconds", ".5", "written like 2 or 0.5"),
    ("state_ttl_seconds", "-1", "whole number of seconds, 0 or more"),
    ("state_ttl_seconds", "1.5", "whole number of seconds"),
    ("state_ttl_seconds", "007", "written like 0 or 3600"),
    ("checkpoint_location", "", "must not be empty"),
    ("checkpoint_location", " checkpoints", "must not start or end with spaces"),
    ("checkpoint_location", "http://example.com/ckpt", "scheme file, hdfs, s3, s3a, gs, abfs"),
    ("checkpoint_location", "s3:///no-bucket", "must name its bucket"),
    ("checkpoint_location", "file:relative", "absolute path"),
    ("checkpoint_location", "C:\\checkpoints", "not c:"),
    ("checkpoint_location", "/tmp/back\\slash", "must not contain double quotes or backslashes"),
    ("transactional_id_prefix", "", "must not be empty"),
    ("transactional_id_prefix", "t" * 201, "at most 200 characters"),
    ("transactional_id_prefix", "color counts", "printable ASCII without whitespace"),
    ("transactional_id_prefix", "zähler", "printable ASCII"),
    ("transactional_id_prefix", "a'b", "without whitespace, quotes or backslashes"),
]
# Cookiecutter itself refuses a choice outside its list before any hook runs; the hook checks them
# too, for contexts that bypass the prompt (replay files, cruft's --variables-to-update).
BAD_CHOICES = [
    ("query", "windowed", "must be one of count-by-key, windowed-count, stateless"),
    ("value_format", "thrift", "must be one of json, avro, protobuf"),
    ("delivery_guarantee", "exactly-twice", "must be one of exactly-once, at-least-once"),
    ("include_github_actions", "maybe", "must be one of yes, no"),
    ("include_deployment", "true", "must be one of yes, no"),
    ("license", "GPL", "must be one of Apache-2.0, MIT, Proprietary"),
]


@pytest.mark.parametrize(("question", "value", "rule"), BAD_ANSWERS)
def test_a_bad_answer_stops_rendering_with_its_rule(
    question: str, value: str, rule: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    answers = {question: value}
    if question == "project_name":  # the slug derives from it: an empty one would fail before the hook
        answers["project_slug"] = "color-counts"
    if question == "project_slug":  # the derived defaults must stay valid so that only one rule breaks
        answers |= {"package_name": "color_counts", "marker_topic": "markers", "transactional_id_prefix": "tx"}
    with pytest.raises(FailedHookException):
        render(tmp_path, **answers)
    errors = [line for line in capfd.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"error: {question}: {value!r}: "), errors
    assert rule in errors[0], errors
    assert list(tmp_path.iterdir()) == [], "nothing may be written when an answer is refused"


@pytest.mark.parametrize(("question", "value", "rule"), BAD_CHOICES)
def test_a_choice_outside_its_list_is_refused(
    question: str, value: str, rule: str, tmp_path: Path, default_answers: dict[str, str]
) -> None:
    with pytest.raises(ValueError, match=f"{value} provided for choice variable {question}"):
        render(tmp_path, **{question: value})
    assert pre_gen.problems(default_answers | {question: value}) == [f"{question}: {value!r}: {rule}"]


def test_every_rule_has_a_failing_answer_above() -> None:
    questions = {question for question, _, _ in BAD_ANSWERS + BAD_CHOICES}
    assert questions == set(pre_gen.RULES) | set(pre_gen.CHOICES)


def test_topics_differing_only_in_dot_versus_underscore_collide(default_answers: dict[str, str]) -> None:
    found = pre_gen.problems(default_answers | {"input_topic": "team.events", "output_topic": "team_events"})
    rule = "must differ from input_topic (Kafka treats '.' and '_' in topic names as the same)"
    assert found == [f"output_topic: 'team_events': {rule}"]


def _rendered_identifiers(project: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("rendered_identifiers", next(project.glob("src/*/identifiers.py")))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hook_checks_identifiers_with_the_file_the_project_gets(rendered_default: Path) -> None:
    """No copy of the rules: the hook's module is the template's identifiers.py, which the project
    gets unchanged (it holds no template markers) and its config checks with."""
    template_file = TEMPLATE / pre_gen.IDENTIFIERS
    assert Path(pre_gen.identifiers.__file__).resolve() == template_file.resolve()
    assert (rendered_default / "src/color_counts/identifiers.py").read_text() == template_file.read_text()
    assert "from .identifiers import" in (rendered_default / "src/color_counts/config.py").read_text()
    assert pre_gen.RULES["transactional_id_prefix"] is pre_gen.identifiers.transactional_id_prefix_problem
    assert {pre_gen.RULES[question] for question in pre_gen.TOPIC_QUESTIONS} == {pre_gen.identifiers.topic_problem}


@pytest.mark.parametrize(
    ("question", "value", "rule"),
    [
        *(("transactional_id_prefix", value, "transactional_id_prefix_problem")
          for value in ("", "t" * 201, "a b", "a'b", "zähler", "tx$(id)", "tx")),
        *(("input_topic", value, "topic_problem") for value in ("", ".", "a/b", "t" * 250, "team.events")),
        *(("marker_topic", value, "topic_problem") for value in ("..", "markers")),
    ],
)
def test_the_hook_and_the_rendered_config_agree(
    question: str, value: str, rule: str, default_answers: dict[str, str], rendered_default: Path
) -> None:
    problem = getattr(_rendered_identifiers(rendered_default), rule)(value)
    assert pre_gen.problems(default_answers | {question: value}) == ([] if problem is None else
                                                                     [f"{question}: {value!r}: {problem}"])


@pytest.mark.parametrize("slug", ["color-counts", "a", "x9-y", "s" * 64])
def test_a_good_project_slug_is_a_good_default_sink_id(slug: str, default_answers: dict[str, str]) -> None:
    assert pre_gen.problems(default_answers | {"project_slug": slug}) == []
    assert pre_gen.identifiers.sink_id_problem(slug) is None


REFUSAL = "refused by this template's own identifiers.py"


def _template_copy(destination: Path) -> Path:
    """The template, copied, with an identifiers.py whose prefix rule refuses every answer."""
    shutil.copytree(TEMPLATE, destination, ignore=shutil.ignore_patterns(
        ".git", ".venv", "demo", "bench", "__pycache__", ".pytest_cache", ".ruff_cache", "*.egg-info"))
    module = destination / pre_gen.IDENTIFIERS
    module.write_text(module.read_text() + f"\n\ndef transactional_id_prefix_problem(value: str) -> str:\n"
                                           f"    return {REFUSAL!r}\n")
    return destination


def test_the_running_hook_applies_the_rules_of_the_template_it_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Cookiecutter runs a rendered copy of the hook from a temporary file, in the new project's
    directory: it must still load the identifiers.py of the template being rendered, here a copy
    named by a relative path."""
    _template_copy(tmp_path / "template")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FailedHookException):
        cookiecutter("template", no_input=True, output_dir="out")
    assert f"error: transactional_id_prefix: 'color-counts': {REFUSAL}" in capfd.readouterr().err


def test_under_cruft_the_hook_applies_the_rules_of_the_commit_it_renders(tmp_path: Path) -> None:
    """cruft renders a temporary clone of the template at a commit, and its context names only the
    template's URL: the hook must load the clone's identifiers.py, not the one in the URL's work tree."""
    template = _template_copy(tmp_path / "template")
    git = ["git", "-c", "user.name=Template Test", "-c", "user.email=test@example.invalid", "-c",
           "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=template, check=True)
    subprocess.run([*git, "add", "-A"], cwd=template, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "refusing"], cwd=template, check=True)
    shutil.copy(TEMPLATE / pre_gen.IDENTIFIERS, template / pre_gen.IDENTIFIERS)  # the work tree accepts
    cruft = Path(sys.executable).with_name("cruft")
    created = subprocess.run([str(cruft), "create", "--no-input", "--output-dir", str(tmp_path / "out"), str(template)],
                             cwd=tmp_path, capture_output=True, text=True, check=False)
    assert created.returncode != 0
    assert f"error: transactional_id_prefix: 'color-counts': {REFUSAL}" in created.stderr, created.stderr


def test_the_hook_reads_a_process_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert pre_gen._working_directory(os.getpid()) == tmp_path.resolve()
    if shutil.which("lsof") is None:
        pytest.skip("no lsof here: it stands in for /proc on macOS")
    assert pre_gen._lsof_working_directory(os.getpid()) == tmp_path.resolve()


def test_the_default_answers_have_no_problems(default_answers: dict[str, str]) -> None:
    assert pre_gen.problems(default_answers) == []


def test_the_stateless_query_refuses_a_state_ttl(default_answers: dict[str, str]) -> None:
    stateless = default_answers | {"query": "stateless"}
    assert pre_gen.problems(stateless) == []
    assert pre_gen.problems(stateless | {"state_ttl_seconds": "60"}) == [
        "state_ttl_seconds: '60': must be 0 for the stateless query, which keeps no state"]


def test_the_windowed_count_refuses_a_state_ttl_and_a_bad_window(default_answers: dict[str, str]) -> None:
    windowed = default_answers | {"query": "windowed-count"}
    assert pre_gen.problems(windowed) == []
    assert pre_gen.problems(windowed | {"state_ttl_seconds": "60", "window_seconds": "0",
                                        "allowed_lateness_seconds": "-1", "event_time_field": "color"}) == [
        "window_seconds: '0': must be a whole number of seconds above 0, written like 10 or 60",
        "allowed_lateness_seconds: '-1': must be a whole number of seconds, 0 or more, written like 0 or 30",
        ("state_ttl_seconds: '60': must be 0 for the windowed-count query, which drops a window's state once "
         "the watermark passes it"),
        "event_time_field: 'color': must differ from key_field"]
    assert pre_gen.problems(windowed | {"event_time_field": "1st"}) == [
        ("event_time_field: '1st': must be a JSON field name: letters, digits and underscores, not starting "
         "with a digit")]


def test_all_problems_are_reported_at_once(default_answers: dict[str, str]) -> None:
    found = pre_gen.problems(default_answers | {"package_name": "os", "key_field": "", "state_ttl_seconds": "x"})
    assert [problem.split(":")[0] for problem in found] == ["package_name", "key_field", "state_ttl_seconds"]


@pytest.mark.parametrize(
    "expression",
    [
        "color != 'orange'",
        "CAST(color AS INT) > 3",
        "CASE WHEN color = 'red' THEN true ELSE color ILIKE 'b%' END",
        "split(color, '-')[0] = 'dark'",
        "color IN ('a;b', 'c--d', '/*e*/') AND `odd;name` IS NULL",
        "color = \"it's\" OR color RLIKE '^b'",
    ],
)
def test_the_hook_leaves_spark_sql_to_spark(expression: str, default_answers: dict[str, str]) -> None:
    """Valid Spark SQL beyond any hand-written subset passes; the rendered project's own unit
    test checks the answer with Spark's analyzer (tests/unit/test_filter.py)."""
    assert pre_gen.problems({**default_answers, "filter_expression": expression}) == []


def test_the_post_generation_hook_records_the_public_answers(rendered_default: Path) -> None:
    recorded = json.loads((rendered_default / ".cookiecutter.json").read_text())
    assert recorded["project_slug"] == "color-counts"
    assert recorded["filter_expression"] == "color != 'orange'"
    assert not [key for key in recorded if key.startswith("_")]


# Answers that look like code or carry quotes, backslashes, spaces, unicode, great length: each
# must be refused by the pre-generation hook or come out intact in a project whose files all parse.
SAFE_IDENTITY = {"project_slug": "hostile", "package_name": "hostile", "marker_topic": "markers",
                 "transactional_id_prefix": "tx"}
HOSTILE = [
    ("project_name", "__import__('os').system('touch /tmp/pwned')"),
    ("project_name", '"""; import os; """'),
    ("project_name", "Zähler für Farben ✓"),
    ("project_name", "Bob's counts"),
    ("description", 'She said "hi", then \'bye\''),
    ("description", 'ends with a quote"'),
    ("description", 'triple """ quotes'),
    ("description", "back\\slash \\n \\N{BULLET} \\x41"),
    ("description", "ends with a backslash\\"),
    ("description", "naïve ünïcödé – ✓ " + "long " * 55),
    ("package_name", "__import__('os').system('x')"),
    ("package_name", "os"),
    ("project_slug", "x'); import os; ('"),
    ("input_topic", "events; rm -rf /"),
    ("key_field", 'color": "x'),
    ("filter_expression", "__import__('os').system('x')"),
    ("filter_expression", "color = '\"\"\"' OR color = 'back\\\\slash' OR color = 'ünï'"),
    ("filter_expression", "color = 'x'); import os; ('"),
    ("checkpoint_location", "/tmp/with space/it's $(touch pwned) `id`"),
    ("checkpoint_location", 's3://bucket/"quoted"'),
    ("transactional_id_prefix", "tx$(id)`id`{}[]<>!#%&*"),
]


def _files_parse(root: Path) -> None:
    for path in root.rglob("*.py"):
        ast.parse(path.read_text(), filename=str(path))
    for path in root.rglob("*.toml"):
        tomllib.loads(path.read_text())
    for path in [*root.rglob("*.yaml"), *root.rglob("*.yml")]:
        yaml.safe_load(path.read_text())
    for path in root.rglob("*.sh"):
        subprocess.run(["bash", "-n", str(path)], check=True)


@pytest.mark.parametrize(("question", "value"), HOSTILE)
def test_hostile_answers_are_refused_or_rendered_intact(
    question: str, value: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    answers = SAFE_IDENTITY | {question: value}
    try:
        project = render(tmp_path, **answers)
    except FailedHookException:
        assert f"error: {question}: {value!r}: " in capfd.readouterr().err
        assert not (tmp_path / "pwned").exists() and not Path("/tmp/pwned").exists()
        return
    _files_parse(project)
    assert json.loads((project / ".cookiecutter.json").read_text())[question] == value
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    if question == "description":
        assert pyproject["project"]["description"] == value
    if question in ("project_name", "description"):
        assert value in (project / "README.md").read_text()
    if question == "checkpoint_location":
        # spark-submit.sh asks the job for its checkpoint (deploy/resolve.py): the answer is not in it.
        assert value not in (project / "deploy/spark-submit.sh").read_text()
        # Nor in the Kubernetes manifest: the job file, mounted from a ConfigMap, decides there too.
        assert value not in (project / "deploy/k8s/spark-application.yaml").read_text()
    job = tomllib.loads((project / "job.toml").read_text())
    if question in job:
        assert job[question] == value
    if question == "filter_expression":
        assert job["filter"] == value
