"""One typed configuration, read from the job file, the environment and `--set` flags,
validated before anything starts. Every error names the option it is about."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

DEFAULT_CONFIG_PATH = Path("job.toml")
ENV_PREFIX = "{{ cookiecutter.package_name | upper }}_"
GUARANTEES = ("exactly-once", "at-least-once")
RESTART_STRATEGIES = ("none", "fixed-delay", "exponential-backoff", "failure-rate")
FIELD_TYPES = ("string", "int", "float", "bool")
TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class ConfigError(ValueError):
    """A bad configuration value; the message starts with the option's name."""

    def __init__(self, option: str, problem: str) -> None:
        super().__init__(f"configuration option '{option}': {problem}")
        self.option = option


@dataclass(frozen=True)
class JobConfig:
    bootstrap_servers: str = "127.0.0.1:9092"
    input_topic: str = "{{ cookiecutter.input_topic }}"
    output_topic: str = "{{ cookiecutter.output_topic }}"
    dead_letter_topic: str = "{{ cookiecutter.dead_letter_topic }}"
    marker_topic: str = "{{ cookiecutter.marker_topic }}"
    schema: dict[str, str] = field(default_factory=lambda: {"{{ cookiecutter.key_field }}": "string"})
    key_field: str = "{{ cookiecutter.key_field }}"
    filter: str = {{ cookiecutter.filter_expression | tojson }}
    max_record_bytes: int = 65536

    delivery_guarantee: str = "{{ cookiecutter.delivery_guarantee }}"
    checkpoint_location: str = "{{ cookiecutter.checkpoint_location }}"
    sink_id: str = "{{ cookiecutter.project_slug }}"
    transactional_id_prefix: str = "{{ cookiecutter.transactional_id_prefix }}"
    commit_shards: int = 1
    commit_timeout_seconds: float = 60.0
    staging_retention_batches: int = 2

    trigger_interval_seconds: float = {{ cookiecutter.trigger_interval_seconds }}
    max_records_per_trigger: int = 200_000
    starting_offsets: str = "earliest"  # earliest | latest | {"<partition>": <offset>, ...}
    fail_on_data_loss: bool = True
    state_ttl_seconds: int = {{ cookiecutter.state_ttl_seconds }}
    shuffle_partitions: int = 4
    spark_master: str = "local[2]"

    restart_strategy: str = "fixed-delay"
    restart_attempts: int = 3
    restart_delay_seconds: float = 5.0
    restart_max_delay_seconds: float = 60.0
    failure_rate_interval_seconds: float = 300.0

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == "exactly-once"

    def with_overrides(self, **values: Any) -> JobConfig:
        return validated(dataclasses.replace(self, **values))


def option_names() -> list[str]:
    return [f.name for f in fields(JobConfig)]


def _coerce(option: str, raw: Any, target: Any) -> Any:
    """Turn a file, environment or flag value into the option's type, or say why not."""
    try:
        if target == "bool":
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("true", "1", "yes"):
                return True
            if str(raw).lower() in ("false", "0", "no"):
                return False
            raise ValueError
        if target == "int":
            if isinstance(raw, (float, bool)):
                raise ValueError
            return int(raw)
        if target == "float":
            return float(raw)
        if target == "dict[str, str]":
            value = json.loads(raw) if isinstance(raw, str) else raw
            if not isinstance(value, dict):
                raise ValueError
            return {str(k): str(v) for k, v in value.items()}
        return str(raw)
    except (TypeError, ValueError, json.JSONDecodeError):
        expected = {"dict[str, str]": "a table of field = type"}.get(target, f"a {target}")
        raise ConfigError(option, f"{raw!r} is not {expected}") from None


def load_config(
    path: Path | None = None, overrides: dict[str, str] | None = None, environ: dict[str, str] | None = None
) -> JobConfig:
    """Defaults < the job file < environment variables < `--set` overrides, then validation."""
    environ = dict(os.environ if environ is None else environ)
    types = {f.name: f.type for f in fields(JobConfig)}
    values: dict[str, Any] = {}
    if path is not None:
        if not path.exists():
            raise ConfigError("config", f"file {path} does not exist")
        try:
            values.update(tomllib.loads(path.read_text()))
        except tomllib.TOMLDecodeError as error:
            raise ConfigError("config", f"{path} is not valid TOML: {error}") from None
    if environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        values["bootstrap_servers"] = environ["KAFKA_BOOTSTRAP_SERVERS"]
    for name in types:
        if (env_value := environ.get(ENV_PREFIX + name.upper())) is not None:
            values[name] = env_value
    values.update(overrides or {})
    unknown = sorted(set(values) - set(types))
    if unknown:
        raise ConfigError(unknown[0], f"unknown option; known options are: {', '.join(types)}")
    typed = {name: _coerce(name, raw, types[name]) for name, raw in values.items()}
    return validated(JobConfig(**typed))


def validated(config: JobConfig) -> JobConfig:
    """Checks that need no broker and no Spark; `preflight` does the others at start-up."""
    for option in ("input_topic", "output_topic", "dead_letter_topic", "marker_topic"):
        name = getattr(config, option)
        if not TOPIC_NAME.match(name) or name in (".", ".."):
            raise ConfigError(option, f"{name!r} is not a valid Kafka topic name")
    topics = [config.input_topic, config.output_topic, config.dead_letter_topic, config.marker_topic]
    if len(set(topics)) != len(topics):
        raise ConfigError("output_topic", "input, output, dead-letter and marker topics must all differ")
    if config.delivery_guarantee not in GUARANTEES:
        raise ConfigError("delivery_guarantee", f"{config.delivery_guarantee!r} is not one of {', '.join(GUARANTEES)}")
    if config.restart_strategy not in RESTART_STRATEGIES:
        raise ConfigError(
            "restart_strategy", f"{config.restart_strategy!r} is not one of {', '.join(RESTART_STRATEGIES)}"
        )
    for field_name, field_type in config.schema.items():
        if field_type not in FIELD_TYPES:
            raise ConfigError("schema", f"field {field_name!r} has type {field_type!r}; use one of {FIELD_TYPES}")
    if config.key_field not in config.schema:
        raise ConfigError("key_field", f"{config.key_field!r} is not a field of the schema {sorted(config.schema)}")
    positive = ("trigger_interval_seconds", "max_records_per_trigger", "max_record_bytes", "commit_shards",
                "shuffle_partitions", "commit_timeout_seconds")
    for option in positive:
        if getattr(config, option) <= 0:
            raise ConfigError(option, f"must be positive, got {getattr(config, option)}")
    for option in ("state_ttl_seconds", "restart_attempts", "restart_delay_seconds", "staging_retention_batches"):
        if getattr(config, option) < 0:
            raise ConfigError(option, f"must not be negative, got {getattr(config, option)}")
    if not config.bootstrap_servers.strip():
        raise ConfigError("bootstrap_servers", "must not be empty")
    if not config.checkpoint_location.strip():
        raise ConfigError("checkpoint_location", "must not be empty")
    if not config.filter.strip():
        raise ConfigError("filter", "must not be empty; use 'true' to count every event")
    starting_offsets(config)
    return config


def starting_offsets(config: JobConfig) -> str | dict[int, int]:
    """`earliest`, `latest`, or explicit offsets per partition as JSON: {"0": 42, "1": 0}."""
    value = config.starting_offsets.strip()
    if value in ("earliest", "latest"):
        return value
    try:
        parsed = json.loads(value)
        offsets = {int(partition): int(offset) for partition, offset in parsed.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(
            "starting_offsets", f"{value!r} is not earliest, latest or a JSON object of partition: offset"
        ) from None
    if any(offset < 0 for offset in offsets.values()):
        raise ConfigError("starting_offsets", "offsets must not be negative")
    return offsets
