"""The command-line reference (docs/cli.md), written from the two parsers themselves: every
command of the job and of its tools, each argument with its default, choices and help. A unit
test holds the file to this output, so it cannot drift from the code."""

from __future__ import annotations

import argparse

HEADER = """# Command-line reference

Generated from the parsers by `.venv/bin/{{ cookiecutter.project_slug }}-tools reference > docs/cli.md`; \
`tests/unit/test_cli_reference.py` fails when it is out of date.
`--config` and `--set` take the job file and the options the README's Configure section lists;
any command's `--help` prints what its section says.

Environment: `LOG_LEVEL` (`INFO`; `DEBUG` adds Spark's and py4j's stack traces),
`KAFKA_BOOTSTRAP_SERVERS` (replaces `bootstrap_servers`), `{env_prefix}<OPTION>` (any option, e.g.
`{env_prefix}CHECKPOINT_LOCATION`; a table such as `{env_prefix}KAFKA` replaces the whole table,
where `--set kafka.x=...` merges one key).
"""


def cli_reference() -> str:
    from {{ cookiecutter.package_name }}.cli import build_parser as job_parser
    from {{ cookiecutter.package_name }}.config import ENV_PREFIX

    from .cli import build_parser as tools_parser

    sections = [HEADER.format(env_prefix=ENV_PREFIX)]
    for title, parser in (("The job", job_parser()), ("The tools", tools_parser())):
        sections.append(f"## {title}: `{parser.prog}`\n")
        for name, sub in _subcommands(parser).items():
            sections.append(_command(parser.prog, name, sub))
    return "\n".join(sections)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its sub-commands only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _command(prog: str, name: str, parser: argparse.ArgumentParser) -> str:
    lines = [f"### `{prog} {name}`\n", f"{parser.description}\n"]
    rows = [_row(action) for action in parser._actions if not isinstance(action, argparse._HelpAction)]
    if rows:
        lines += ["| argument | default | what it does |", "| --- | --- | --- |", *rows]
    return "\n".join(lines) + "\n"


def _row(action: argparse.Action) -> str:
    if action.option_strings:
        flag = ", ".join(action.option_strings)
        takes = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
        argument = f"`{flag}{takes}`"
    else:
        argument = f"`{action.dest}`"
    if action.choices:
        argument += " (" + " \\| ".join(f"`{choice}`" for choice in action.choices) + ")"
    default = "" if action.default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else f"`{action.default}`"
    what = (action.help or "").replace("|", "\\|").replace("%(default)s", str(action.default))
    return f"| {argument} | {default} | {what} |"
