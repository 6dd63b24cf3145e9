"""The references written from the code itself, which unit tests hold the documents to, so they
cannot drift from it: the command line (docs/cli.md), from the two parsers (every command of the
job and of its tools, each argument with its default, choices and help); the configuration
(docs/configuration.md), from JobConfig (every option with its type, rules, default, environment
variable and meaning)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

HEADER = """# Command-line reference

Generated from the parsers by `.venv/bin/{{ cookiecutter.project_slug }}-tools reference > docs/cli.md`; \
`tests/unit/test_cli_reference.py` fails when it is out of date.
`--config` and `--set` take the job file and the options docs/configuration.md lists;
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


# How an option's annotation reads in the table.
TYPES = {"str": "text", "int": "integer", "float": "number", "bool": "`true` or `false`", "dict[str, str]": "table"}
CONFIG_HEADER = "| option | type, rules | default | environment | meaning |\n| --- | --- | --- | --- | --- |"


def config_table() -> str:
    """docs/configuration.md's table: a row per JobConfig option."""
    from {{ cookiecutter.package_name }}.config import ENV_PREFIX, JobConfig, option_rules

    defaults, rules = JobConfig(), option_rules()
    rows = [CONFIG_HEADER]
    for option in dataclasses.fields(JobConfig):
        name, kind = option.name, TYPES.get(str(option.type), "text")  # a Literal alias is text
        table = kind == "table"
        environment = f"`{ENV_PREFIX}{name.upper()}`" + (" (JSON; replaces the table)" if table else "")
        if name == "bootstrap_servers":
            environment += ", `KAFKA_BOOTSTRAP_SERVERS`"
        cells = [f"`[{name}]`" if table else f"`{name}`", "; ".join([kind, *rules[name]]),
                 _default(getattr(defaults, name)), environment, option.metadata["doc"]]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"


def _default(value: Any) -> str:
    if isinstance(value, dict):
        return "empty" if not value else "`{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + " }`"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int):
        return str(value)
    return f"`{value}`"
