"""Validate the answers before anything is rendered. Answers are read as data (through
`tojson`), never pasted into Python source, so no answer can run as code."""

from __future__ import annotations

import json
import re
import sys

ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")

PACKAGE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def problems(answers: dict[str, object]) -> list[str]:
    found = []
    if not PACKAGE_NAME.match(str(answers["package_name"])):
        found.append(
            f"package_name {answers['package_name']!r}: must be a Python package name "
            "(lower-case letters, digits and underscores, not starting with a digit)"
        )
    return found


if __name__ == "__main__":
    errors = problems(ANSWERS)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    sys.exit(1 if errors else 0)
