"""The query as the project's job file (job.toml) configures it: its schema, key field, filter,
state TTL and values' formats. The tests and the chaos runner start the job with these, and judge its output by the
query's model under the same configuration, so a team's change to them is what gets proven; every
other option (topics, checkpoint, triggers) they set for themselves. And the other way round: a
job file written from such settings, for a job submitted the way a deployment submits it."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from {{ cookiecutter.package_name }}.config import DEFAULT_CONFIG_PATH, TABLE_OPTIONS, JobConfig, load_config

QUERY_OPTIONS = ("schema", "key_field", "filter", "state_ttl_seconds", "input_format", "output_format", "input_message")
# Of the registry's table, its address alone: the credentials may name secrets; a run that uses
# Avro gives its own registry's address (the tests' session registry, the demo's).
REGISTRY_URL = "url"


def query_config(path: Path = DEFAULT_CONFIG_PATH, **changes: str) -> JobConfig:
    """The defaults with the job file's query options (nothing else of it: its client settings
    may name secrets the tests do not have), then `changes` (option=value as `--set` takes it)."""
    written: dict[str, Any] = tomllib.loads(path.read_text()) if path.exists() else {}
    chosen = {name: _as_setting(written[name]) for name in QUERY_OPTIONS if name in written}
    if REGISTRY_URL in written.get("schema_registry", {}):
        chosen[f"schema_registry.{REGISTRY_URL}"] = written["schema_registry"][REGISTRY_URL]
    return load_config(None, {**chosen, **changes}, environ={})


def query_settings(config: JobConfig) -> dict[str, str]:
    """`config`'s query options as `--set` settings of the job (with Avro values, the registry's
    address too: a run that has its own registry replaces it)."""
    settings = {name: _as_setting(getattr(config, name)) for name in QUERY_OPTIONS}
    if config.uses_registry:
        settings[f"schema_registry.{REGISTRY_URL}"] = config.schema_registry[REGISTRY_URL]
    return settings


def _as_setting(value: object) -> str:
    return json.dumps(value) if isinstance(value, dict) else str(value)


def write_job_file(path: Path, settings: dict[str, str]) -> Path:
    """A job file holding `settings` (option=value as `--set` takes them; `s3.endpoint` and the
    like go to their table): every value a TOML string, which the job reads as the option's type."""
    lines = [f"{name} = {_toml_string(value)}" for name, value in settings.items()
             if name.partition(".")[0] not in TABLE_OPTIONS]
    for table in TABLE_OPTIONS:
        # In a table the key is what follows `kafka.` or `s3.`; a Spark setting keeps its full name.
        entries = {(name if table == "spark" else name.partition(".")[2]): value
                   for name, value in settings.items() if name.partition(".")[0] == table}
        if entries:
            lines += ["", f"[{table}]", *(f"{_toml_string(key)} = {_toml_string(value)}"
                                          for key, value in entries.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml_string(value: str) -> str:
    """A TOML basic string: JSON's form of it, except that TOML wants DEL escaped too."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
