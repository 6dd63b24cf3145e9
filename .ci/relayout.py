#!/usr/bin/env python3
"""Move the job's modules into packages by layer, and rewrite every reference to them.

Run from the repository root, on a tree that may hold other edits:

    python3 .ci/relayout.py            # move, rewrite, `git add` what it touched
    python3 .ci/relayout.py --dry-run  # check and print the plan, change nothing

Each move is a `git mv`. Every import of a moved module is rewritten in the template's
src/, tools/, tests/ and deploy/ (relative imports resolved to the module they name, mapped
old -> new, and made relative again from the importing module's new place, so a module moved a
level down gets `..` where it had `.`), and every mention of one elsewhere: dotted names
(`{{ cookiecutter.package_name }}.runtime.runner`, monkeypatch targets, `-m` names, logger names),
paths (`src/<package>/runtime/runner.py`, `runtime/runner.py`, `"runtime" / "runner.py"`), the
renamed files' bare names (`kafka_client.py`), in docs/, the READMEs, the Makefiles, the
pyproject files, deploy/, the template's own tests/ and hooks/, and .ci/. Imports it changed are
sorted again with ruff (`$RUFF`, else `ruff` on the PATH), on the files with Jinja expressions
replaced by placeholders.

It refuses to start (and changes nothing) when a module to move is missing or not tracked, a
destination exists, runtime/ holds a module it does not place, or a Python file does not parse:
run it once, on a tree where the moves are still to do. The top-level `errors` (or `failures`)
module stays where it is; imports of it from moved modules are re-relativized like any other.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TEMPLATE = Path("{{cookiecutter.project_slug}}")
PACKAGE = TEMPLATE / "src" / "{{cookiecutter.package_name}}"
LINE_LENGTH = 120
SELF = Path(".ci/relayout.py")

# Old path -> new path, inside the package.
MOVES = {
    "kafka_client.py": "kafka/client.py",
    "kafka_permissions.py": "kafka/permissions.py",
    "topics.py": "kafka/topics.py",
    "session.py": "spark/session.py",
    "class_archive.py": "spark/class_archive.py",
    "resolved_jars.py": "spark/resolved_jars.py",
    "storage.py": "storage/files.py",
    "object_store.py": "storage/object_store.py",
    "checkpoint.py": "storage/checkpoint.py",
    "driver_presence.py": "storage/driver_presence.py",
    "runtime/logs.py": "observability/logs.py",
    "runtime/metrics.py": "observability/metrics.py",
    "runtime/runner.py": "supervision/runner.py",
    "runtime/heartbeat.py": "supervision/heartbeat.py",
    "runtime/outage.py": "supervision/outage.py",
    "runtime/progress_reports.py": "supervision/progress_reports.py",
    "runtime/preflight.py": "startup/preflight.py",
    "runtime/startup.py": "startup/startup.py",
    "runtime/status.py": "operations/status.py",
}
# Packages whose modules all move: their __init__.py goes, and the folder must end up empty.
DISSOLVED = ("runtime",)
# The new packages, with their docstrings.
NEW_PACKAGES = {
    "observability": "What the job tells: its log (logs.py) and the sink's metrics (metrics.py). The bottom\n"
                     "layer: nothing here imports the rest of the job but its errors.",
    "storage": "The checkpoint's storage: its files through pyarrow (files.py), a checkpoint on S3\n"
               "(object_store.py), Spark's checkpoint read (checkpoint.py), and a running driver's presence\n"
               "in it with the stop requests to it (driver_presence.py).",
    "kafka": "Kafka as the job's own clients see it: the [kafka] client settings for confluent-kafka\n"
             "(client.py), the ACLs the job needs (permissions.py), `topics create` (topics.py).",
    "spark": "The Spark session the job runs in (session.py), the connector's jars (resolved_jars.py) and\n"
             "the driver JVM's class archive (class_archive.py). Their Ivy and log4j2 files are the\n"
             "package's conf/.",
    "operations": "The operators' commands that look at a job from outside it: `status` (status.py).",
    "startup": "A start: the checks before and while Spark starts (preflight.py), and where a start's\n"
               "seconds go (startup.py).",
    "supervision": "Running the query: supervision, restarts and the clean stop (runner.py), the driver's\n"
                   "heartbeat (heartbeat.py), Kafka outages waited out (outage.py), Spark's progress\n"
                   "reports (progress_reports.py).",
}
# A moved module's own paths that change with its depth: (new path, old text, new text).
PATH_FIXES = [
    ("spark/session.py", 'CONF_DIR = Path(__file__).with_name("conf")',
     'CONF_DIR = Path(__file__).parent.parent / "conf"  # the package\'s conf/'),
]

# Text files, besides the template's Python files, whose mentions of moved modules are rewritten.
TEXT_GLOBS = [
    "README.md", "docs/*.md", "Makefile", "tests/*.py", "hooks/*.py", ".ci/*",
]
TEMPLATE_TEXT_GLOBS = [
    "README.md", "Makefile", "pyproject.toml", "tools/pyproject.toml", "job.toml", "deploy/**/*",
    ".github/**/*", "src/**/*", "tools/**/*", "tests/**/*",
]

PKG = "<package>"  # the job's package in module names held as tuples
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)
PACKAGE_NAME = re.compile(r"\{\{\s*cookiecutter\.package_name\s*\}\}")
PLACEHOLDER = re.compile(r"CCPKGNAME\d+|CCJINJA\d+")


def die(lines: list[str]) -> None:
    print("relayout: nothing done:", file=sys.stderr)
    for line in lines:
        print(f"  {line}", file=sys.stderr)
    sys.exit(1)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


# --- module names ----------------------------------------------------------------------------------

def module_of(path: Path) -> tuple[str, ...]:
    """A file of the package as its module name, (PKG, ...)."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return (PKG, *(parts[:-1] if parts[-1] == "__init__" else parts))


def package_of(path: Path) -> tuple[str, ...]:
    """The package a relative import in `path` starts from."""
    module = module_of(path)
    return module if path.name == "__init__.py" else module[:-1]


MODULE_MOVES = {module_of(PACKAGE / old): module_of(PACKAGE / new) for old, new in MOVES.items()}
DISSOLVED_MODULES = {(PKG, name) for name in DISSOLVED}


def moved(module: tuple[str, ...]) -> tuple[str, ...]:
    """A module's (or a name in it's) new dotted name; unchanged if nothing of it moved."""
    for length in range(len(module), 1, -1):
        if module[:length] in MODULE_MOVES:
            return MODULE_MOVES[module[:length]] + module[length:]
    if module[:2] in DISSOLVED_MODULES:
        raise ValueError(f"{'.'.join(module[1:])}: the package {module[1]} is dissolved, and this is none of "
                         "its modules")
    return module


# --- Python files -----------------------------------------------------------------------------------

@dataclass
class Source:
    """A Python file with its Jinja expressions as placeholders, so that it parses."""

    text: str
    originals: dict[str, str]

    @classmethod
    def of(cls, text: str) -> Source:
        if "CCPKGNAME" in text or "CCJINJA" in text:
            raise ValueError("holds the script's placeholder names")
        originals: dict[str, str] = {}
        spelled: dict[str, str] = {}

        def placeholder(match: re.Match[str]) -> str:
            expression = match.group(0)
            if expression not in spelled:
                kind = "CCPKGNAME" if PACKAGE_NAME.fullmatch(expression) else "CCJINJA"
                if expression.startswith(("{%", "{#")):
                    raise ValueError(f"a Jinja tag in Python code: {expression[:40]!r}")
                spelled[expression] = f"{kind}{len(spelled)}"
                originals[spelled[expression]] = expression
            return spelled[expression]

        return cls(JINJA.sub(placeholder, text), originals)

    def restored(self, text: str) -> str:
        return PLACEHOLDER.sub(lambda match: self.originals.get(match.group(0), "{{ cookiecutter.package_name }}"),
                               text)

    @property
    def package_tokens(self) -> list[str]:
        return [token for token in self.originals if token.startswith("CCPKGNAME")] or ["CCPKGNAME0"]


def _absolute(name: str | None, tokens: list[str]) -> tuple[str, ...] | None:
    """`<package>.a.b` as (PKG, a, b); None for another package."""
    parts = tuple((name or "").split("."))
    return (PKG, *parts[1:]) if parts[0] in tokens else None


def _spelled(module: tuple[str, ...], token: str) -> str:
    return ".".join((token, *module[1:]))


def _relative(importer: tuple[str, ...], target: tuple[str, ...]) -> str:
    common = 0
    while common < min(len(importer), len(target)) and importer[common] == target[common]:
        common += 1
    return "." * (len(importer) - common + 1) + ".".join(target[common:])


def _alias(name: str, asname: str | None) -> str:
    return f"{name} as {asname}" if asname and asname != name else name


class Rewrite:
    """The import statements of one file, rewritten; `edits` are (start, end, new text)."""

    def __init__(self, source: Source, old_path: Path | None, new_path: Path | None, modules: set[tuple[str, ...]],
                 where: str) -> None:
        self.source = source
        self.old_package = package_of(old_path) if old_path else None
        self.new_package = package_of(new_path) if new_path else None
        self.modules = modules
        self.where = where
        self.tokens = source.package_tokens
        self.edits: list[tuple[int, int, str]] = []
        self.spans: list[tuple[int, int]] = []
        self.notes: list[str] = []
        lines = source.text.splitlines(keepends=True)
        self.starts = [0]
        for line in lines:
            self.starts.append(self.starts[-1] + len(line))
        self.lines = lines
        for node in ast.walk(ast.parse(source.text)):
            if isinstance(node, ast.ImportFrom | ast.Import):
                self._statement(node)

    def _offset(self, line: int, column: int) -> int:
        """ast's (line, UTF-8 byte column) as an offset in the text."""
        return self.starts[line - 1] + len(self.lines[line - 1].encode()[:column].decode())

    def _statement(self, node: ast.ImportFrom | ast.Import) -> None:
        start = self._offset(node.lineno, node.col_offset)
        end = self._offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
        self.spans.append((start, end))
        original = self.source.text[start:end]
        new = self._from(node, original) if isinstance(node, ast.ImportFrom) else self._import(node)
        if new is not None and new != original:
            indent = " " * node.col_offset
            new = new.replace("\n", "\n" + indent)
            if "#" in original and "\n" in new:
                first = original.splitlines()[0]
                self.notes.append(f"{self.where}:{node.lineno}: comments inside `{first}...` dropped")
            self.edits.append((start, end, new))

    def _import(self, node: ast.Import) -> str | None:
        names = []
        for alias in node.names:
            module = _absolute(alias.name, self.tokens)
            if module is not None and moved(module) != module:
                names.append(_alias(_spelled(moved(module), alias.name.split(".")[0]), alias.asname))
            else:
                names.append(_alias(alias.name, alias.asname))
        return "import " + ", ".join(names)

    def _from(self, node: ast.ImportFrom, original: str) -> str | None:
        relative = node.level > 0
        if relative:
            if self.old_package is None:
                return None  # a relative import of the tools or the tests: none of the job's
            kept = len(self.old_package) - node.level + 1
            base = self.old_package[:kept] + (tuple(node.module.split(".")) if node.module else ())
            token = self.tokens[0]
        else:
            absolute = _absolute(node.module, self.tokens)
            if absolute is None:
                return None
            base, token = absolute, (node.module or "").split(".")[0]
        importer_moved = relative and self.new_package != self.old_package
        groups: dict[tuple[str, ...], list[str]] = {}
        changed = False
        for alias in node.names:
            full = (*base, alias.name)
            if full in self.modules and moved(full) != full:  # a module that moves, imported by name
                target = moved(full)
                groups.setdefault(target[:-1], []).append(_alias(target[-1], alias.asname or alias.name))
                changed = True
            else:
                new_base = moved(base)
                changed |= new_base != base
                groups.setdefault(new_base, []).append(_alias(alias.name, alias.asname))
        if not changed and not importer_moved:
            return None

        def spelled(module: tuple[str, ...]) -> str:
            return _relative(self.new_package, module) if relative else _spelled(module, token)

        names_kept = [_alias(a.name, a.asname) for a in node.names]
        if len(groups) == 1 and next(iter(groups.values())) == names_kept:  # the module's name alone changes
            head = re.match(r"from\s+([.\w]+|\.+)\s+import\b", original)
            if head is None:
                raise ValueError(f"{self.where}:{node.lineno}: cannot read {original!r}")
            return original[:head.start(1)] + spelled(next(iter(groups))) + original[head.end(1):]
        return "\n".join(f"from {spelled(module)} import {', '.join(names)}" for module, names in groups.items())

    def apply(self, text_rules: TextRules) -> str:
        """The text with its imports rewritten, and the text rules applied outside them."""
        edits = {start: (end, new) for start, end, new in self.edits}
        out, position = [], 0
        for start, end in sorted(self.spans):
            out.append(text_rules.apply(self.source.text[position:start]))
            out.append(edits[start][1] if start in edits else self.source.text[start:end])
            position = end
        out.append(text_rules.apply(self.source.text[position:]))
        return "".join(out)


# --- text ---------------------------------------------------------------------------------------------

class TextRules:
    """The mentions of moved modules outside import statements: Python code in strings
    (`"from <package> import session"`), dotted names, paths, bare file names. One regular
    expression for all, longest old name first, so that no replacement is looked at again
    (`checkpoint` -> `storage.checkpoint` must not then match `storage`)."""

    def __init__(self) -> None:
        package = r"(?:\{\{\s*cookiecutter\.package_name\s*\}\}|\{\{cookiecutter\.package_name\}\}|CCPKGNAME\d+)"
        by_length = sorted(MOVES.items(), key=lambda item: -len(item[0]))
        self.dotted = {old.removesuffix(".py").replace("/", "."): new.removesuffix(".py").replace("/", ".")
                       for old, new in by_length}
        self.paths = dict(by_length)
        # Bare names: of a module in a folder, or of one whose file name changes.
        self.bare = {old: new for old, new in by_length if "/" in old or old.split("/")[-1] != new.split("/")[-1]}

        def names(mapping: dict[str, str]) -> str:
            return "|".join(re.escape(name) for name in mapping)

        self.pattern = re.compile(
            rf"\bfrom\s+(?P<e_pkg>{package})\s+import\s+(?P<e_names>\w+(?:[ \t]*,[ \t]*\w+)*)"
            rf"|(?P<d_pre>{package}\.)(?P<d_name>{names(self.dotted)})(?![\w])"
            rf"|(?P<p_pre>(?:{package}|\*)/)(?P<p_name>{names(self.paths)})(?![\w/])"
            rf"|(?<![\w./-])(?P<b_name>{names(self.bare)})(?![\w/])")
        self.unhandled: list[str] = []
        self.joined = []  # "runtime" / "runner.py" and "runtime", "runner.py"
        for old, new in by_length:
            if "/" in old:
                for joint, spelled in ((r"\s*/\s*", " / "), (r"\s*,\s*", ", ")):
                    pattern = re.compile(joint.join(f'"{re.escape(part)}"' for part in old.split("/")))
                    self.joined.append((pattern, spelled.join(f'"{part}"' for part in new.split("/"))))

    def _replace(self, match: re.Match[str]) -> str:
        if match.group("e_pkg") is not None:  # from <package> import a, b
            groups: dict[tuple[str, ...], list[str]] = {}
            for name in re.split(r"[ \t]*,[ \t]*", match.group("e_names")):
                target = MODULE_MOVES.get((PKG, name), (PKG, name))
                groups.setdefault(target[:-1], []).append(_alias(target[-1], name))
            if len(groups) > 1:
                self.unhandled.append(match.group(0))
                return match.group(0)
            ((package, imported),) = groups.items()
            return f"from {_spelled(package, match.group('e_pkg'))} import {', '.join(imported)}"
        if match.group("d_pre") is not None:
            return match.group("d_pre") + self.dotted[match.group("d_name")]
        if match.group("p_pre") is not None:
            return match.group("p_pre") + self.paths[match.group("p_name")]
        return self.bare[match.group("b_name")]

    def apply(self, text: str) -> str:
        for pattern, replacement in self.joined:
            text = pattern.sub(replacement, text)
        return self.pattern.sub(self._replace, text)


# --- the run ------------------------------------------------------------------------------------------

def ruff_command() -> list[str] | None:
    found = os.environ.get("RUFF") or shutil.which("ruff")
    return [found] if found else None


def sorted_imports(text: str, tokens: list[str], filename: Path, ruff: list[str] | None) -> str:
    if ruff is None:
        return text
    first_party = ",".join(f"'{t}','{t}_tools'" for t in tokens)
    result = subprocess.run(
        [*ruff, "check", "--isolated", "--select", "I", "--fix", "--quiet", "--line-length", str(LINE_LENGTH),
         "--config", f"lint.isort.known-first-party=[{first_party}]",
         "--config", "lint.isort.known-local-folder=['harness','conftest']",
         "--stdin-filename", str(filename), "-"], input=text, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1) or not result.stdout:
        raise RuntimeError(f"ruff on {filename}: {result.stderr.strip()}")
    return result.stdout


def text_files(root: Path, patterns: list[str]) -> list[Path]:
    found: set[Path] = set()
    for pattern in patterns:
        found.update(path for path in root.glob(pattern) if path.is_file())
    return sorted(path for path in found if "__pycache__" not in path.parts and path != SELF
                  and "bench-results" not in path.parts)


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        return None  # not text


def check(tracked: set[str]) -> list[str]:
    problems = []
    if not PACKAGE.is_dir():
        return [f"no {PACKAGE}: run from the repository's root"]
    for old, new in MOVES.items():
        if not (PACKAGE / old).is_file():
            problems.append(f"{PACKAGE / old} is missing (moved already?)")
        elif str(PACKAGE / old) not in tracked:
            problems.append(f"{PACKAGE / old} is not tracked by git: commit it first")
        if (PACKAGE / new).exists():
            problems.append(f"{PACKAGE / new} exists already")
    for name in NEW_PACKAGES:
        if (PACKAGE / name / "__init__.py").exists():
            problems.append(f"{PACKAGE / name / '__init__.py'} exists already")
    for name in DISSOLVED:
        placed = {old for old in MOVES if old.startswith(name + "/")} | {f"{name}/__init__.py"}
        others = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / name).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and str(p.relative_to(PACKAGE)) not in placed)
        if others:
            problems.append(f"{PACKAGE / name} holds what this script does not place: {', '.join(others)}")
    for new, old_text, _ in PATH_FIXES:
        old = next(o for o, n in MOVES.items() if n == new)
        if (PACKAGE / old).is_file() and (PACKAGE / old).read_text().count(old_text) != 1:
            problems.append(f"{PACKAGE / old}: expected `{old_text}` once (its path changes with the move)")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="check and print the plan, change nothing")
    args = parser.parse_args()
    if not TEMPLATE.is_dir():
        die([f"no {TEMPLATE}/ here: run from the repository's root"])
    tracked = set(git("ls-files", "--", str(PACKAGE)).splitlines())
    problems = check(tracked)

    modules = {module_of(path) for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts}
    new_path_of = {PACKAGE / old: PACKAGE / new for old, new in MOVES.items()}
    python_files = sorted(path for path in TEMPLATE.rglob("*.py") if "__pycache__" not in path.parts
                          and ".venv" not in path.parts)
    text_rules = TextRules()
    ruff = ruff_command()
    contents: dict[Path, str] = {}  # new path -> new text, for the files that change
    notes: list[str] = []
    for path in python_files:
        try:
            source = Source.of(path.read_text())
            in_package = PACKAGE in path.parents
            new_path = new_path_of.get(path, path)
            rewrite = Rewrite(source, path if in_package else None, new_path if in_package else None, modules,
                              str(path))
            text = rewrite.apply(text_rules)
            for new, old_text, new_text in PATH_FIXES:
                if new_path == PACKAGE / new:
                    text = text.replace(old_text, new_text)
            fixed = any(new_path == PACKAGE / n for n, _, _ in PATH_FIXES)
            if path in new_path_of and "__file__" in text and not fixed:
                notes.append(f"{new_path}: uses __file__, and moved: check its paths")
            if rewrite.edits:
                text = sorted_imports(text, source.package_tokens, new_path, ruff)
            notes += rewrite.notes
        except (SyntaxError, ValueError, RuntimeError) as error:
            problems.append(f"{path}: {error}")
            continue
        text = source.restored(text)
        if text != path.read_text() or path in new_path_of:
            contents[new_path] = text
    for path in text_files(Path("."), TEXT_GLOBS) + text_files(TEMPLATE, TEMPLATE_TEXT_GLOBS):
        if path.suffix == ".py" and TEMPLATE in path.parents:
            continue  # done above
        text = read_text(path)
        if text is not None and (new := text_rules.apply(text)) != text:
            contents[path] = new
    if problems:
        die(problems)

    print(("would move" if args.dry_run else "moving") + f" {len(MOVES)} modules of {PACKAGE}:")
    for old, new in MOVES.items():
        print(f"  {old:28} -> {new}")
    changed = sorted(str(path) for path in contents if path not in new_path_of.values())
    rewritten = sorted(str(path) for path, text in contents.items() if path in new_path_of.values())
    print(f"{'would rewrite' if args.dry_run else 'rewrote'} references in {len(changed)} files:")
    for path in changed:
        print(f"  {path}")
    print(f"and in {len(rewritten)} of the moved modules themselves")
    if ruff is None:
        print("warning: no ruff (set RUFF or put it on the PATH): imports are not sorted again", file=sys.stderr)
    if args.dry_run:
        for note in notes:
            print(f"note: {note}")
        return 0

    for old, new in MOVES.items():
        (PACKAGE / new).parent.mkdir(parents=True, exist_ok=True)
        git("mv", str(PACKAGE / old), str(PACKAGE / new))
    for name in DISSOLVED:
        git("rm", "-q", str(PACKAGE / name / "__init__.py"))
        shutil.rmtree(PACKAGE / name / "__pycache__", ignore_errors=True)
        if (PACKAGE / name).exists():
            (PACKAGE / name).rmdir()  # fails loudly if anything is left
        print(f"removed {PACKAGE / name}/ (its modules moved)")
    for name, doc in NEW_PACKAGES.items():
        init = PACKAGE / name / "__init__.py"
        init.write_text(f'"""{doc}"""\n')
        contents.pop(init, None)
        print(f"created {init}")
    for path, text in contents.items():
        path.write_text(text)
    git("add", "--", *(str(p) for p in contents), *(str(PACKAGE / n / "__init__.py") for n in NEW_PACKAGES))

    left = []
    leftover = re.compile(r"\bkafka_client\b|\bkafka_permissions\b|\bruntime[./]|[^/\w]storage\.py\b")
    for path in [*python_files, *contents]:
        path = new_path_of.get(path, path)
        text = read_text(path) if path.exists() else None
        for number, line in enumerate((text or "").splitlines(), 1):
            if leftover.search(line):
                left.append(f"{path}:{number}: {line.strip()[:110]}")
    notes += [f"Python in a string, importing modules that went apart: {code}" for code in text_rules.unhandled]
    for note in notes:
        print(f"note: {note}")
    if left:
        print("left for a reader (old names that may still mean the old modules):")
        for line in sorted(set(left)):
            print(f"  {line}")
    print("done; staged. Then: update tests/unit/test_layout.py's layers and the README's Layout by hand.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
