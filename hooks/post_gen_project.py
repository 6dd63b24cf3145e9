"""After rendering: remove the files of options not chosen (and of the query shapes not chosen),
and record the answers.

Runs in the rendered project's directory. Answers are read as data, as in pre_gen_project.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

# Option -> the paths it owns (removed when the answer is "no").
OPTIONAL_PATHS = {
    "include_github_actions": (".github",),
    # The cluster tests and the hand-over test of spark-submit.sh run deploy/ scripts.
    "include_deployment": ("deploy", "tests/cluster", "tests/unit/test_spark_submit.py"),
}
# Query shape -> the paths only the other shapes use (removed when it is chosen); {package}: the package's name.
QUERY_PATHS = {
    "count-by-key": ("src/{package}/pipeline/projection.py", "src/{package}/pipeline/windowed_counting.py",
                     "tests/unit/test_windowed_counting.py", "tests/integration/test_late_events.py"),
    "windowed-count": ("src/{package}/pipeline/projection.py", "src/{package}/pipeline/counting.py",
                       "src/{package}/pipeline/aggregates.py",
                       "src/{package}/pipeline/ttl_counting.py", "tests/unit/test_counting.py",
                       "tests/unit/test_ttl_counting.py"),
    "stateless": ("src/{package}/pipeline/counting.py", "src/{package}/pipeline/ttl_counting.py",
                  "src/{package}/pipeline/aggregates.py",
                  "tests/unit/test_counting.py", "tests/unit/test_ttl_counting.py",
                  "src/{package}/pipeline/windowed_counting.py", "tests/unit/test_windowed_counting.py",
                  "tests/integration/test_late_events.py"),
}
ANSWERS_FILE = ".cookiecutter.json"


def prune(root: Path, answers: dict[str, object]) -> None:
    unused = [root / name for option, paths in OPTIONAL_PATHS.items() if answers.get(option) == "no" for name in paths]
    unused += [root / name.format(package=answers["package_name"])
               for name in QUERY_PATHS[str(answers.get("query", "count-by-key"))]]
    for path in unused:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def record(root: Path, answers: dict[str, object]) -> None:
    """The public answers, flat: `cruft create --extra-context-file .cookiecutter.json <template>` or
    `cruft link --extra-context "$(cat .cookiecutter.json)" <template>` reproduce this project. Private
    keys (`_template`, `_output_dir`, ...) differ per run and would make every update show a diff."""
    public = {key: value for key, value in answers.items() if not key.startswith("_")}
    (root / ANSWERS_FILE).write_text(json.dumps(public, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def main() -> None:
    answers = json.loads(r"""{{ cookiecutter | tojson }}""")
    root = Path.cwd()
    prune(root, answers)
    record(root, answers)


if __name__ == "__main__":
    main()
