"""The rules for topic names, the sink id and the transactional id prefix: one module that both the
template's pre-generation hook and `config` check with."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }} import identifiers
from {{ cookiecutter.package_name }}.config import ConfigError, load_config
from {{ cookiecutter.package_name }}.identifiers import (
    sink_id_problem,
    topic_collisions,
    topic_problem,
    transactional_id_prefix_problem,
)


@pytest.mark.parametrize("name", ["events", "a", "Team.events_v2-raw", "t" * 249, "...", "_"])
def test_a_kafka_topic_name_is_accepted(name: str) -> None:
    assert topic_problem(name) is None


@pytest.mark.parametrize("name", ["", ".", "..", "t" * 250, "bad topic", "a/b", "events!", "zähler", "tab\t"])
def test_a_name_kafka_refuses_is_refused(name: str) -> None:
    assert topic_problem(name) == "must be a Kafka topic name: 1 to 249 of a-z A-Z 0-9 . _ -, and not '.' or '..'"


def test_topics_must_differ_also_in_dot_versus_underscore() -> None:
    assert topic_collisions({"input_topic": "events", "output_topic": "counts"}) == {}
    assert topic_collisions({"input_topic": "events", "output_topic": "counts", "marker_topic": "events"}) == {
        "marker_topic": "must differ from input_topic"
    }
    assert topic_collisions({"input_topic": "team.events", "output_topic": "team_events"}) == {
        "output_topic": "must differ from input_topic (Kafka treats '.' and '_' in topic names as the same)"
    }


@pytest.mark.parametrize("value", ["{{ cookiecutter.project_slug }}", "a", "9lives", "Sink_1.g2", "s" * 100])
def test_a_sink_id_is_accepted(value: str) -> None:
    assert sink_id_problem(value) is None


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("", "must not be empty"),
        ("a/b", "no '/'"),
        ("a b", "no spaces"),
        ("tab\t", "a-z A-Z 0-9 . _ -"),
        ("..", "starting with a letter or digit"),
        (".hidden", "starting with a letter or digit"),
        ("-x", "starting with a letter or digit"),
        ("zähler", "a-z A-Z 0-9 . _ -"),
        ("a:b", "a-z A-Z 0-9 . _ -"),
        ("s" * 101, "at most 100 characters, not 101"),
    ],
)
def test_a_sink_id_unsafe_as_path_key_or_label_is_refused(value: str, rule: str) -> None:
    assert rule in (sink_id_problem(value) or "")


@pytest.mark.parametrize("value", ["{{ cookiecutter.transactional_id_prefix }}", "tx", "tx$(id)`id`{}[]<>!#%&*",
                                   "t" * 200])
def test_a_transactional_id_prefix_is_accepted(value: str) -> None:
    assert transactional_id_prefix_problem(value) is None


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("", "must not be empty"),
        ("t" * 201, "at most 200 characters, not 201"),
        ("a b", "printable ASCII without whitespace"),
        ("tab\t", "printable ASCII without whitespace"),
        ("zähler", "printable ASCII"),
        ("a'b", "without whitespace, quotes or backslashes"),
        ('a"b', "without whitespace, quotes or backslashes"),
        ("a\\b", "without whitespace, quotes or backslashes"),
    ],
)
def test_a_bad_transactional_id_prefix_is_refused(value: str, rule: str) -> None:
    assert rule in (transactional_id_prefix_problem(value) or "")


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("sink_id", "a/b", "'a/b': must be a-z A-Z 0-9 . _ -, starting with a letter or digit (no '/', no spaces)"),
        ("sink_id", "a b", "'a b': must be a-z A-Z 0-9 . _ -, starting with a letter or digit (no '/', no spaces)"),
        ("sink_id", "", "'': must not be empty"),
        ("transactional_id_prefix", "", "'': must not be empty"),
        ("transactional_id_prefix", "a b", "'a b': must be printable ASCII without whitespace, quotes or backslashes"),
        ("dead_letter_topic", "a/b", "'a/b': must be a Kafka topic name"),
    ],
)
def test_config_refuses_what_the_rules_refuse_naming_the_option(option: str, value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(None, {option: value}, environ={})
    assert raised.value.option == option
    assert str(raised.value).startswith(f"configuration option '{option}': {problem}")


def test_the_default_identifiers_pass() -> None:
    config = load_config(None, environ={})
    assert (config.sink_id, config.transactional_id_prefix) == (
        "{{ cookiecutter.project_slug }}", "{{ cookiecutter.transactional_id_prefix }}"
    )


def test_the_module_can_be_loaded_by_path_from_the_template() -> None:
    """The template's hook loads this file unrendered: standard library only, no template markers."""
    source = Path(identifiers.__file__).read_text()
    assert "{" + "{" not in source and "{" + "%" not in source
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "a relative import needs the package, which the hook does not have"
            imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
