"""The shipped documents: the template's (README.md, CHANGELOG.md, docs/*.md) and a rendering's
(README.md, docs/*.md) for the default answers and the answers that change the documents.

- every relative Markdown link `[text](path)` and every backticked path to a file of the
  repository (`docs/guarantee.md`, `deploy/k8s/alerts.yaml`) names a file that exists;
- a numbered reference "(docs/guarantee.md, 6)" names an item the target's numbered list has;
- no document speaks of how it was made: outside code, no commit hashes, no "session" (but for
  a Spark session, a test session, a session fixture), no "issue N", none of a few phrases of a
  story; history goes to CHANGELOG.md, briefly;
- docs/example/ holds the default rendering's README and docs/*.md, as the template renders them
  now, and its links stay inside it.

Each answer set is rendered once per test run (conftest's rendered_with)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import TEMPLATE

# The answer sets whose renderings' documents are checked, besides the default's.
ANSWER_SETS = {
    "stateless": {"query": "stateless"},
    "windowed-count": {"query": "windowed-count"},
    "at-least-once": {"delivery_guarantee": "at-least-once"},
    "no-deployment": {"include_deployment": "no"},
}
# The default rendering's documents, committed so that a reader of the template sees a rendering.
EXAMPLE = TEMPLATE / "docs" / "example"
REFRESH_EXAMPLE = ("rm -rf docs/example /tmp/example && .venv/bin/cookiecutter --no-input -o /tmp/example . && "
                   "mkdir docs/example && cp -r /tmp/example/color-counts/README.md /tmp/example/color-counts/docs "
                   "docs/example/")


@pytest.fixture(scope="session")
def renderings(rendered_default: Path, rendered_with: Callable[..., Path]) -> dict[str, Path]:
    return {"default": rendered_default, **{name: rendered_with(**answers) for name, answers in ANSWER_SETS.items()}}


def template_documents() -> list[Path]:
    return [TEMPLATE / "README.md", TEMPLATE / "CHANGELOG.md", *sorted((TEMPLATE / "docs").glob("*.md"))]


def rendered_documents(project: Path) -> list[Path]:
    return [project / "README.md", *sorted((project / "docs").glob("*.md"))]


# --- reading a Markdown document ------------------------------------------------------------

FENCE = re.compile(r"^\s*(```|~~~)")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside code blocks (fenced, or indented four spaces after a blank line), with
    their numbers; inline code stays in them."""
    lines: list[tuple[int, str]] = []
    fenced = indented = False
    previous_blank = True
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            previous_blank = False
            continue
        if fenced:
            continue
        blank = not line.strip()
        if indented and not blank and not line.startswith("    "):
            indented = False
        if not indented and previous_blank and line.startswith("    ") and not re.match(r"\s*([-*]|\d+\.) ", line):
            indented = True
        if not indented:
            lines.append((number, line))
        previous_blank = blank
    return lines


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A file the documents name: a path with a directory (`deploy/k8s/alerts.yaml`, `.ci/run`) or a
# Markdown file (`CHANGELOG.md`); no placeholders, globs or elisions (`tools/.../verify.py`).
PATH_LIKE = re.compile(r"^\.?[A-Za-z0-9_][\w.-]*(/[\w.-]+)*/?$")
FILE_SUFFIXES = (".md", ".py", ".yaml", ".yml", ".toml", ".json", ".sh", ".xml", ".properties", ".txt", ".cfg",
                 ".png")
NUMBERED_REFERENCE = re.compile(r"\(([\w./-]+\.md),\s*(\d+)\)")
NUMBERED_ITEM = re.compile(r"^\s{0,3}(\d+)\. ")


def links(text: str) -> list[tuple[int, str]]:
    """Relative links of the prose, without their #fragment: (line, target)."""
    found = []
    for number, line in prose_lines(text):
        for match in LINK.finditer(CODE_SPAN.sub("``", line)):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # https://, mailto:, a heading of the same page
            found.append((number, target.split("#", 1)[0]))
    return found


def path_references(text: str, roots: list[Path]) -> list[tuple[int, str]]:
    """Backticked paths of the prose that look like a file of the repository: (line, path). A
    path with a directory counts when it ends in a file suffix or its first directory exists in
    one of `roots` (`.ci/run`, `tests/unit`); a bare name when it is a Markdown file."""
    found = []
    for number, line in prose_lines(text):
        for match in CODE_SPAN.finditer(line):
            token = match.group(1).strip()
            if not PATH_LIKE.match(token) or ".." in token:
                continue
            if "/" in token.rstrip("/"):
                first = token.split("/", 1)[0]
                if not (token.endswith(FILE_SUFFIXES) or any((root / first).is_dir() for root in roots)):
                    continue
            elif not token.endswith(".md"):
                continue
            found.append((number, token))
    return found


def numbered_items(text: str) -> int:
    """The highest item number of the document's numbered lists (0: none)."""
    return max((int(m.group(1)) for _, line in prose_lines(text) if (m := NUMBERED_ITEM.match(line))), default=0)


# --- the checks ---------------------------------------------------------------------------------


def broken_references(document: Path, tree: Path, search: list[Path]) -> list[str]:
    """The document's links that do not resolve from its folder, its backticked paths that exist
    in none of `search` (nor its folder), and its numbered references past the target's list."""
    text = document.read_text()
    where = document.relative_to(tree).as_posix()
    broken = []
    for number, target in links(text):
        if target and not (document.parent / target).exists():
            broken.append(f"{where}:{number}: link to {target}, which does not exist")
    roots = [document.parent, *search]
    for number, path in path_references(text, roots):
        if not any((root / path).exists() for root in roots):
            broken.append(f"{where}:{number}: `{path}`: no such file")
    for number, line in prose_lines(text):
        for match in NUMBERED_REFERENCE.finditer(line):
            target = next((root / match.group(1) for root in roots if (root / match.group(1)).is_file()), None)
            item = int(match.group(2))
            if target is None:
                broken.append(f"{where}:{number}: ({match.group(1)}, {item}): no such file")
            elif item > (items := numbered_items(target.read_text())):
                broken.append(f"{where}:{number}: ({match.group(1)}, {item}): its numbered list has {items} items")
    return broken


def package_roots(project: Path) -> list[Path]:
    """Where a rendering's documents name files from: its root and its packages' folders
    (`sink/kafka_sink.py` is src/<package>/sink/kafka_sink.py)."""
    return [project, *sorted(p for p in (project / "src").glob("*") if p.is_dir()),
            *sorted(p for p in (project / "tools" / "src").glob("*") if p.is_dir())]


def test_the_template_documents_references_exist(rendered_default: Path) -> None:
    """The template's documents name the template's files and the rendered project's (the default
    rendering's: `tests/harness.py`, `sink/kafka_sink.py`)."""
    search = [TEMPLATE, TEMPLATE / "tests", *package_roots(rendered_default)]
    broken = [problem for document in template_documents()
              for problem in broken_references(document, TEMPLATE, search)]
    assert not broken, "references to files that do not exist:\n" + "\n".join(broken)


@pytest.mark.parametrize("answers", ["default", *ANSWER_SETS])
def test_a_renderings_documents_references_exist(answers: str, renderings: dict[str, Path]) -> None:
    project = renderings[answers]
    broken = [problem for document in rendered_documents(project)
              for problem in broken_references(document, project, package_roots(project))]
    assert not broken, f"rendering {answers}: references to files that do not exist:\n" + "\n".join(broken)


# A commit hash as a document would cite one: 7 to 40 hex digits with both digits and letters.
COMMIT_HASH = re.compile(r"(?<![\w./#-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w/-])")
# How the product was made: the session that made it, an issue that asked for it, and a few
# phrases of a story (what changed since a run before, what the sink did before).
HISTORY = re.compile(r"\b(?:session|sessions)\b|\bissues? #?\d+\b|#\d{1,5}\b|\bthrow-?away script\b|"
                     r"\bwhat changed since\b|\bthe run before\b|\bin earlier runs?\b|\bas the \w+ did before\b",
                     re.IGNORECASE)
# "session" in the sense of a program's: Spark's, a test run's, a fixture's scope.
SESSION_SENSES = re.compile(r"spark session|session fixture|\bsession[- ]scoped\b|scope=\"session\"|"
                            r"test session|pytest session|the job's session|browser session", re.IGNORECASE)


def history_words(document: Path, tree: Path) -> list[str]:
    where = document.relative_to(tree).as_posix()
    found = []
    for number, line in prose_lines(document.read_text()):
        prose = CODE_SPAN.sub("``", line)
        prose = re.sub(r"\]\([^)]*\)", "]()", prose)  # link targets: paths, not words
        found += [f"{where}:{number}: commit hash {m.group(0)}" for m in COMMIT_HASH.finditer(prose)]
        kept = SESSION_SENSES.sub("", prose)
        found += [f"{where}:{number}: {m.group(0)!r}: ...{kept[max(0, m.start() - 50):m.end() + 30].strip()}..."
                  for m in HISTORY.finditer(kept)]
    return found


def test_the_template_documents_tell_no_history() -> None:
    found = [word for document in template_documents() for word in history_words(document, TEMPLATE)]
    assert not found, ("commit hashes or history in shipped documents (they describe the template as it is; "
                       "history goes to CHANGELOG.md, briefly):\n" + "\n".join(found))


@pytest.mark.parametrize("answers", ["default", *ANSWER_SETS])
def test_a_renderings_documents_tell_no_history(answers: str, renderings: dict[str, Path]) -> None:
    project = renderings[answers]
    found = [word for document in rendered_documents(project) for word in history_words(document, project)]
    assert not found, (f"rendering {answers}: commit hashes or history in shipped documents (they describe "
                       "the project as it is):\n" + "\n".join(found))


def test_the_example_is_the_default_renderings_documents(rendered_default: Path) -> None:
    """The template's README links to docs/example/README.md: the default rendering's README and
    docs/*.md, as the template renders them now."""
    def documents(root: Path) -> dict[str, str]:
        return {path.relative_to(root).as_posix(): path.read_text() for path in rendered_documents(root)
                if path.is_file()}

    example, rendering = documents(EXAMPLE), documents(rendered_default)
    differ = sorted(name for name in example.keys() | rendering.keys() if example.get(name) != rendering.get(name))
    assert not differ, (f"docs/example/ is not the default rendering's documents ({', '.join(differ)} differ); "
                        f"refresh it from the template's root:\n    {REFRESH_EXAMPLE}")


def test_the_examples_links_stay_inside_it() -> None:
    """The example is read on its own: its links must land on the documents it holds."""
    def held(document: Path, target: Path) -> bool:
        linked = (document.parent / target).resolve()
        return linked.is_relative_to(EXAMPLE.resolve()) and linked.exists()

    broken = [f"docs/example/{document.relative_to(EXAMPLE).as_posix()}:{number}: link to {target}"
              for document in rendered_documents(EXAMPLE) if document.is_file()
              for number, target in links(document.read_text()) if target and not held(document, Path(target))]
    assert not broken, "the example links to files it does not hold:\n" + "\n".join(broken)


# --- the checks' own rules, on small documents ----------------------------------------------------


def test_the_rules_read_prose_not_code(tmp_path: Path) -> None:
    document = tmp_path / "README.md"
    document.write_text(
        "# Title\n\nSee [design](docs/design.md#top), `deploy/k8s/alerts.yaml`, `CHANGELOG.md`,\n"
        "(docs/guarantee.md, 3) and [the web](https://example.org). `offsets/N`, `tools/.../verify.py`\n"
        "and `bench/out` are not files. The Spark session, a session fixture; measured on 1a2b3c4.\n\n"
        "    make bench   # 0123abc in a code block, and docs/absent.md\n\n"
        "```\n[absent](absent.md)\n```\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guarantee.md").write_text("1. one\n2. two\n")
    assert links(document.read_text()) == [(3, "docs/design.md")]
    assert path_references(document.read_text(), [tmp_path]) == [(3, "deploy/k8s/alerts.yaml"), (3, "CHANGELOG.md")]
    assert broken_references(document, tmp_path, [tmp_path]) == [
        "README.md:3: link to docs/design.md, which does not exist",
        "README.md:3: `deploy/k8s/alerts.yaml`: no such file",
        "README.md:3: `CHANGELOG.md`: no such file",
        "README.md:4: (docs/guarantee.md, 3): its numbered list has 2 items",
    ]
    assert history_words(document, tmp_path) == ["README.md:5: commit hash 1a2b3c4"]
    # The rule's first word (read from its pattern) and a numbered reference, beside a SparkSession,
    # a hex word and a number, which it must leave alone.
    word, reference = re.search(r"\(\?:(\w+)\|", HISTORY.pattern).group(1), "#12"
    sample = "A line with {word} in it ({reference}), not a SparkSession; deadbeef is a word, 1234567 a number."
    document.write_text(sample.format(word=word, reference=reference) + "\n")
    expected = ["README.md:1: '{word}': ...A line with {word} in it ({reference}), not a SparkSessi...",
                "README.md:1: '{reference}': ...A line with {word} in it ({reference}), not a SparkSession; deadbee..."]
    assert history_words(document, tmp_path) == [line.format(word=word, reference=reference) for line in expected]
