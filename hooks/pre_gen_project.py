"""Validate every answer before anything is rendered.

Answers are read as data (through `tojson`, inside `main`), never pasted into Python source, so no
answer can run as code. `problems(answers)` is pure: the template's tests load this file by path and
call it directly. Each problem reads `<question>: <value!r>: <rule>`; the hook prints them as
`error: ...` and exits 1: cookiecutter then stops and removes the project directory it had begun.

The rules for topic names and the transactional id prefix are the rendered project's own
(`identifiers.py`, which its `config` checks with): this hook loads that file from the template.
"""

from __future__ import annotations

import importlib.util
import json
import keyword
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

Answers = dict[str, object]

SLUG = re.compile(r"[a-z][a-z0-9-]*")
PACKAGE = re.compile(r"[a-z_][a-z0-9_]*")
FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Plain decimals only: the values are pasted into Python and TOML, where `.5`, `007` or `1e3` differ.
POSITIVE_NUMBER = re.compile(r"(0|[1-9][0-9]*)(\.[0-9]+)?")
NON_NEGATIVE_INT = re.compile(r"0|[1-9][0-9]*")
URI_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")  # what Hadoop's Path reads as a scheme
CHECKPOINT_SCHEMES = ("file", "hdfs", "s3", "s3a", "gs", "abfs", "abfss")
# Import names the rendered project depends on; a package of the same name would hide them.
DEPENDENCIES = ("pyspark", "py4j", "confluent_kafka", "pyarrow", "pandas", "numpy", "google", "boto3", "botocore",
                "pytest", "testcontainers")
TOPIC_QUESTIONS = ("input_topic", "output_topic", "dead_letter_topic", "marker_topic")
CHOICES = {
    "value_format": ("json", "avro", "protobuf"),
    "query": ("count-by-key", "windowed-count", "stateless"),
    "delivery_guarantee": ("exactly-once", "at-least-once"),
    "license": ("Apache-2.0", "MIT", "Proprietary"),
    "include_github_actions": ("yes", "no"),
    "include_deployment": ("yes", "no"),
}
# Pasted between double quotes in the rendered project (Python docstrings and strings, TOML, shell).
QUOTE_FREE = ("project_name", "description", "checkpoint_location", "transactional_id_prefix")
# The rendered project's module of identifier rules, in the template: it holds no template markers, so
# the unrendered file is the project's module. The raw block keeps Jinja, which renders this hook
# before it runs, from filling in the directory names.
# {% raw %}
IDENTIFIERS = Path("{{cookiecutter.project_slug}}", "src", "{{cookiecutter.package_name}}", "identifiers.py")
# {% endraw %}


def _working_directory(pid: int) -> Path | None:
    """A process's working directory, as Linux tells it (/proc), or else lsof (macOS has no /proc)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return _lsof_working_directory(pid)


def _lsof_working_directory(pid: int) -> Path | None:
    try:
        listing = subprocess.run(["lsof", "-a", "-p", str(pid), "-d", "cwd", "-Fn"], capture_output=True,
                                 text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((Path(line[1:]) for line in listing.splitlines() if line.startswith("n")), None)


def _template_directory() -> Path:
    """The template this hook belongs to. Loaded where it lies (the template's tests), this file is
    `<template>/hooks/pre_gen_project.py`. Run by cookiecutter or cruft, it is a rendered copy in a
    temporary file, run in the new project's directory, and the context need not name a local
    template (cruft's holds the template's URL, and cruft renders a temporary clone); but both start
    the hook from `generate_files` inside `work_in(<template>)`: the template being rendered is the
    working directory of the process that started the hook."""
    here = Path(__file__).resolve().parent.parent
    if (here / IDENTIFIERS).is_file():
        return here
    starter = _working_directory(os.getppid())
    if starter is not None and (starter / IDENTIFIERS).is_file():
        return starter
    raise ImportError(f"{IDENTIFIERS} is neither in {here} nor in the hook's starting directory {starter}")


def _load_identifiers() -> ModuleType:
    path = _template_directory() / IDENTIFIERS
    spec = importlib.util.spec_from_file_location("identifiers", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


identifiers = _load_identifiers()


def _text(value: object, max_length: int) -> str | None:
    """The rule a free-text answer breaks, if any: one printable line of bounded length."""
    text = str(value)
    if not text.strip():
        return "must not be empty"
    if len(text) > max_length:
        return f"must be at most {max_length} characters, not {len(text)}"
    if any(not ch.isprintable() for ch in text):
        return "must be one line of printable characters (no tabs, newlines or control characters)"
    return None


def _project_slug(value: str) -> str | None:
    if not SLUG.fullmatch(value) or value.endswith("-"):
        return ("must be lower-case letters, digits and hyphens, start with a letter and not end with a "
                "hyphen (e.g. color-counts)")
    if len(value) > 64:
        return f"must be at most 64 characters, not {len(value)}"
    return identifiers.sink_id_problem(value)  # the slug is the job's default sink_id


def _package_name(value: str) -> str | None:
    if not PACKAGE.fullmatch(value):
        return ("must be a Python package name: lower-case letters, digits and underscores, not starting "
                "with a digit (e.g. color_counts)")
    if len(value) > 64:
        return f"must be at most 64 characters, not {len(value)}"
    if keyword.iskeyword(value):
        return "must not be a Python keyword"
    if value in sys.stdlib_module_names:
        return "must not be the name of a standard-library module, which it would shadow"
    if value in DEPENDENCIES:
        return f"must not be the name of a dependency ({', '.join(DEPENDENCIES)}), which it would shadow"
    return None


def _key_field(value: str) -> str | None:
    if not FIELD.fullmatch(value):
        return "must be a JSON field name: letters, digits and underscores, not starting with a digit"
    return identifiers.parse_column_problem(value)


def _filter_expression(value: str) -> str | None:
    """Only what needs no Spark: the rendered project checks the expression with Spark's own
    analyzer against the event schema (preflight.check_filter, and a unit test of the answer)."""
    if not value.strip():
        return "must not be empty; use 'true' to count every event"
    if "\n" in value or "\r" in value:
        return "must be one line"
    outside_quotes = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`", "", value)
    if ";" in outside_quotes:
        return "must be one expression: a semicolon ends a statement"
    if "--" in outside_quotes or "/*" in outside_quotes:
        return "comments are not allowed"
    return None


def _trigger_interval_seconds(value: str) -> str | None:
    if not POSITIVE_NUMBER.fullmatch(value) or not math.isfinite(float(value)) or float(value) <= 0:
        return "must be a positive number of seconds, written like 2 or 0.5"
    return None


def _state_ttl_seconds(value: str) -> str | None:
    if not NON_NEGATIVE_INT.fullmatch(value):
        return "must be a whole number of seconds, 0 or more, written like 0 or 3600 (0 = keep counts forever)"
    return None


def _window_seconds(value: str) -> str | None:
    if not NON_NEGATIVE_INT.fullmatch(value) or value == "0":
        return "must be a whole number of seconds above 0, written like 10 or 60"
    return None


def _allowed_lateness_seconds(value: str) -> str | None:
    if not NON_NEGATIVE_INT.fullmatch(value):
        return "must be a whole number of seconds, 0 or more, written like 0 or 30"
    return None


def _checkpoint_location(value: str) -> str | None:
    if problem := _text(value, 1000):
        return problem
    if value != value.strip():
        return "must not start or end with spaces"
    scheme = URI_SCHEME.match(value)
    if scheme is None:
        return None  # a local path, relative to the job's working directory or absolute
    name, rest = scheme.group(1).lower(), value[scheme.end():]
    if name not in CHECKPOINT_SCHEMES:
        return f"must be a local path or a URI with scheme {', '.join(CHECKPOINT_SCHEMES)}, not {name}:"
    if name == "file":
        return None if re.fullmatch(r"///.*[^/].*", rest) else "a file: URI must name an absolute path (file:///path)"
    if not re.fullmatch(r"//[^/]+(/.*)?", rest):
        return f"a {name}: URI must name its bucket, container or host ({name}://<name>/<path>)"
    return None


RULES: dict[str, Callable[[str], str | None]] = {
    "project_name": lambda value: _text(value, 100),
    "project_slug": _project_slug,
    "package_name": _package_name,
    "description": lambda value: _text(value, 300),
    **dict.fromkeys(TOPIC_QUESTIONS, identifiers.topic_problem),
    "key_field": _key_field,
    "filter_expression": _filter_expression,
    "trigger_interval_seconds": _trigger_interval_seconds,
    "state_ttl_seconds": _state_ttl_seconds,
    "event_time_field": _key_field,
    "window_seconds": _window_seconds,
    "allowed_lateness_seconds": _allowed_lateness_seconds,
    "checkpoint_location": _checkpoint_location,
    "transactional_id_prefix": identifiers.transactional_id_prefix_problem,
}


def problems(answers: Answers) -> list[str]:
    """Every broken rule, as `<question>: <value!r>: <rule>`; empty when all answers are good."""
    found: list[str] = []

    def add(question: str, rule: str) -> None:
        found.append(f"{question}: {answers.get(question)!r}: {rule}")

    for question, rule in RULES.items():
        value = answers.get(question)
        if value is None:
            add(question, "is missing")
        elif (problem := rule(str(value))) is not None:
            add(question, problem)
        elif question in QUOTE_FREE and any(ch in "\"\\" for ch in str(value)):
            add(question, "must not contain double quotes or backslashes")
    for question, allowed in CHOICES.items():
        if answers.get(question) not in allowed:
            add(question, f"must be one of {', '.join(allowed)}")

    if answers.get("query") == "stateless" and str(answers.get("state_ttl_seconds")) != "0":
        add("state_ttl_seconds", "must be 0 for the stateless query, which keeps no state")
    if answers.get("query") == "windowed-count":
        if str(answers.get("state_ttl_seconds")) != "0":
            add("state_ttl_seconds", "must be 0 for the windowed-count query, which drops a window's state once "
                                     "the watermark passes it")
        if answers.get("event_time_field") == answers.get("key_field"):
            add("event_time_field", "must differ from key_field")

    topics = {question: str(answers.get(question)) for question in TOPIC_QUESTIONS}
    for question, problem in identifiers.topic_collisions(topics).items():
        add(question, problem)
    return found


def main() -> int:
    answers = json.loads(r"""{{ cookiecutter | tojson }}""")
    errors = problems(answers)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
