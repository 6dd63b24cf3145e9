"""Every answer's documents fit the answers: renderings with changed answers hold none of the
defaults' words where they do not belong. What a team reads (the README, docs/, the deployment
files, the job file, the Makefile) names its own key field, topics and project; says what its
delivery guarantee gives; speaks of its own query shape and values' format; and names no `make` target the
rendering does not have (its links and file references: test_documents.py). One rendering per
kind of change, shared with the other tests that read it (conftest's rendered_with)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from test_matrix import CUSTOM

# What a team reads, as opposed to code: the words of these are the product's face.
DOCUMENTS = ("README.md", "docs", "deploy/k8s", "job.toml", "Makefile")


def documents(project: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in DOCUMENTS:
        path = project / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.exists() else []
        found.update({str(file.relative_to(project)): file.read_text() for file in files})
    return found


def occurrences(texts: dict[str, str], pattern: str) -> list[str]:
    """`file:line: text` for each line of `texts` that `pattern` matches."""
    compiled = re.compile(pattern)
    return [f"{name}:{number}: {line.strip()}" for name, text in texts.items()
            for number, line in enumerate(text.splitlines(), 1) if compiled.search(line)]


@pytest.fixture(scope="module")
def renamed(rendered_with: Callable[..., Path]) -> Path:
    """Every name changed, at-least-once (the matrix's CUSTOM answers)."""
    return rendered_with(**CUSTOM)


@pytest.fixture(scope="module")
def stateless(rendered_with: Callable[..., Path]) -> Path:
    return rendered_with(query="stateless")


@pytest.fixture(scope="module")
def windowed(rendered_with: Callable[..., Path]) -> Path:
    return rendered_with(query="windowed-count")


@pytest.fixture(scope="module")
def avro(rendered_with: Callable[..., Path]) -> Path:
    return rendered_with(value_format="avro")


@pytest.fixture(scope="module")
def protobuf(rendered_with: Callable[..., Path]) -> Path:
    return rendered_with(value_format="protobuf")


@pytest.fixture(scope="module")
def undeployed(rendered_with: Callable[..., Path]) -> Path:
    return rendered_with(include_deployment="no")


# The defaults' names: project, package, topics, key field and its sample values.
DEFAULT_NAMES = {
    "the project's name": r"(?i)\bcolou?r[-_ ]counts\b",
    "the key field's name": r"(?i)\bcolou?rs?\b",
    "colour values": r"\b(red|orange|blue|green|yellow)\b",
    "the default topics": r"`events`|`counts`|events-dead-letter|\bevents/\d|\"events\"",
}


@pytest.mark.parametrize("what", DEFAULT_NAMES)
def test_a_renamed_project_holds_none_of_the_defaults_names(renamed: Path, what: str) -> None:
    found = occurrences(documents(renamed), DEFAULT_NAMES[what])
    assert not found, f"{what} of the default answers in a rendering with other answers:\n" + "\n".join(found[:20])


def test_the_filter_is_shown_as_written(renamed: Path) -> None:
    found = occurrences(documents(renamed), r"\\u00(27|22|3c|3e|26)")
    assert not found, "the filter (or another answer) shown with JSON's HTML escapes:\n" + "\n".join(found)


def test_an_at_least_once_rendering_says_what_it_gives(renamed: Path) -> None:
    readme = (renamed / "README.md").read_text()
    opening = readme.split("\n## ", 1)[0]
    assert not re.search(r"(?i)exactly[- ]once", opening), f"an at-least-once rendering opens with exactly-once:\n{opening}"
    assert re.search(r"(?i)duplicat", readme), "an at-least-once rendering's README never says a crash duplicates"
    description = (renamed / ".cookiecutter.json").read_text()
    assert not re.search(r"(?i)exactly[- ]once", description.split('"description"', 1)[1].split("\n", 1)[0])


def test_an_at_least_once_rendering_alerts_only_on_what_it_measures(renamed: Path) -> None:
    """The at-least-once sink publishes from tasks: the sink's commit, fence and publish metrics
    stay empty, so a rule on them could never fire."""
    alerts = (renamed / "deploy" / "k8s" / "alerts.yaml").read_text()
    silent = ("eos_sink_last_commit_timestamp_seconds", "eos_sink_commit_failures_total", "eos_sink_fenced_total",
              "ExactlyOnce")
    assert not [name for name in silent if name in alerts], alerts


def test_an_at_least_once_rendering_asks_for_no_transactional_acls(renamed: Path) -> None:
    found = occurrences({"README.md": (renamed / "README.md").read_text()}, r"--transactional-id")
    assert not found, "an at-least-once rendering lists the transactional-id ACL as required:\n" + "\n".join(found)


@pytest.mark.parametrize("words", [r"counts events per key", r"exact count", r"(?i)savepoints?: change or rescale",
                                   r"\| `state_ttl_seconds` \|.*idle"])
def test_a_stateless_rendering_speaks_of_its_own_query(stateless: Path, words: str) -> None:
    found = occurrences(documents(stateless), words)
    assert not found, "a stateless rendering speaks of what it does not do:\n" + "\n".join(found)


@pytest.mark.parametrize("fixture", ["avro", "protobuf"])
@pytest.mark.parametrize("words", [r"\bnot JSON\b", r"the JSON events", r"m\.value\(\)\.decode\(\)"])
def test_a_registry_rendering_speaks_of_its_own_values(fixture: str, words: str, request: pytest.FixtureRequest) -> None:
    found = occurrences(documents(request.getfixturevalue(fixture)), words)
    assert not found, f"a {fixture} rendering speaks of JSON values:\n" + "\n".join(found)


def test_a_rendering_without_deployment_names_none_of_it(undeployed: Path) -> None:
    found = occurrences(documents(undeployed), r"make image|spark-submit\.sh|deploy/k8s|kubectl")
    assert not found, "a rendering without deployment files names them:\n" + "\n".join(found)


@pytest.mark.parametrize("fixture", ["renamed", "stateless", "windowed", "avro", "undeployed"])
def test_every_make_target_named_is_the_renderings_own(fixture: str, request: pytest.FixtureRequest) -> None:
    project: Path = request.getfixturevalue(fixture)
    makefile = (project / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.MULTILINE))
    named = {target for text in documents(project).values()
             for target in re.findall(r"`make ([a-z][\w-]*)", text)}
    assert named <= targets, f"make targets named that the Makefile lacks: {sorted(named - targets)}"
