"""One typed configuration, read from the job file, the environment and `--set` flags,
validated before anything starts. Every error names the option it is about."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

from .failures import ConfigError
from .identifiers import (
    parse_column_problem,
    sink_id_problem,
    topic_collisions,
    topic_problem,
    transactional_id_prefix_problem,
)

DEFAULT_CONFIG_PATH = Path("job.toml")
ENV_PREFIX = "{{ cookiecutter.package_name | upper }}_"
Guarantee = Literal["exactly-once", "at-least-once"]
RestartStrategyKind = Literal["none", "fixed-delay", "exponential-backoff", "failure-rate"]
LogFormat = Literal["text", "json"]  # logs.py
# Where phase 2 publishes a batch from (kafka_sink.py): the driver for small batches, Spark tasks otherwise.
PublishFrom = Literal["auto", "tasks", "driver"]
# A batch re-run after a crash that computed other records than its first attempt, some of whose
# shards are published already (sink/coordinator.py): stop before publishing the rest, or go on.
OnRerunMismatch = Literal["fail", "warn"]
GUARANTEES: tuple[str, ...] = get_args(Guarantee)
RESTART_STRATEGIES: tuple[str, ...] = get_args(RestartStrategyKind)
FIELD_TYPES = ("string", "int", "float", "bool")
LOG_FORMATS: tuple[str, ...] = get_args(LogFormat)
PUBLISH_FROM: tuple[str, ...] = get_args(PublishFrom)
ON_RERUN_MISMATCH: tuple[str, ...] = get_args(OnRerunMismatch)
TOPIC_OPTIONS = ("input_topic", "output_topic", "dead_letter_topic", "marker_topic")
# The [s3] table's settings (object_store.py); secret_access_key may be `${VAR}`, and is masked.
S3_SETTINGS = ("endpoint", "region", "access_key_id", "secret_access_key", "path_style_access")


@dataclass(frozen=True)
class JobConfig:
    bootstrap_servers: str = "127.0.0.1:9092"
    # Kafka client settings for every client the job and its tools make (security.protocol, sasl.*,
    # ssl.*, client.id ...), in librdkafka's names; `${VAR}` takes a value from the environment.
    kafka: dict[str, str] = field(default_factory=dict)
    # Where a checkpoint on s3:// or s3a:// lives (S3_SETTINGS: endpoint, region,
    # access_key_id, secret_access_key, path_style_access), for Spark, the sink and start-up checks.
    s3: dict[str, str] = field(default_factory=dict)
    # Spark settings for the job's session (spark.* names), e.g. spark.driver.maxResultSize or
    # spark.executor.memory; under spark-submit its --conf values win for the SparkContext's.
    spark: dict[str, str] = field(default_factory=dict)
    input_topic: str = "{{ cookiecutter.input_topic }}"
    output_topic: str = "{{ cookiecutter.output_topic }}"
    dead_letter_topic: str = "{{ cookiecutter.dead_letter_topic }}"
    marker_topic: str = "{{ cookiecutter.marker_topic }}"
    # The marker topic's replication when the job creates it: 0 = min(3, brokers) and min(2, that).
    marker_replication_factor: int = 0
    marker_min_insync_replicas: int = 0
    schema: dict[str, str] = field(default_factory=lambda: {"{{ cookiecutter.key_field }}": "string"})
    key_field: str = "{{ cookiecutter.key_field }}"
    filter: str = {{ cookiecutter.filter_expression | tojson }}
    max_record_bytes: int = 65536

    delivery_guarantee: Guarantee = "{{ cookiecutter.delivery_guarantee }}"
    checkpoint_location: str = "{{ cookiecutter.checkpoint_location }}"
    sink_id: str = "{{ cookiecutter.project_slug }}"
    transactional_id_prefix: str = "{{ cookiecutter.transactional_id_prefix }}"
    commit_shards: int = 1
    commit_timeout_seconds: float = 60.0
    publish_from: PublishFrom = "auto"
    on_rerun_mismatch: OnRerunMismatch = "fail"

    trigger_interval_seconds: float = {{ cookiecutter.trigger_interval_seconds }}
    max_offsets_per_trigger: int = 200_000  # Spark's maxOffsetsPerTrigger: transaction markers count too
    starting_offsets: str = "earliest"  # earliest | latest | Spark's JSON: {"<topic>": {"<partition>": <offset>}}
    fail_on_data_loss: bool = True
    state_ttl_seconds: int = {{ cookiecutter.state_ttl_seconds }}
    shuffle_partitions: int = 4
    spark_master: str = "local[2]"

    # "json": one JSON object per log line, the job's and Spark's (logs.py); "text": for people.
    log_format: LogFormat = "text"
    # The Spark UI (its Structured Streaming tab, and Spark's metrics at /metrics/prometheus); 0 = off.
    ui_port: int = 4040
    # The sink's metrics in Prometheus format (metrics.py) at http://<metrics_host>:<metrics_port>/metrics; 0 = off.
    metrics_port: int = 9464
    metrics_host: str = "0.0.0.0"

    # A query failure while Kafka cannot be reached is waited out (outage.py), and counts as a
    # failure for the restart strategy only past this long; 0 = every failure counts.
    kafka_outage_tolerance_seconds: float = 120.0
    # Another producer's transaction left open on the marker topic hides the markers committed after
    # it: a batch waits for it to end (marker.py), and fails only past this long. Such a transaction
    # ends at the latest when the broker aborts it (its transaction.timeout.ms, at most the brokers'
    # transaction.max.timeout.ms: 15 minutes by default).
    foreign_transaction_tolerance_seconds: float = 1200.0
    restart_strategy: RestartStrategyKind = "fixed-delay"
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
            return _flattened(value)
        return str(raw)
    except (TypeError, ValueError, json.JSONDecodeError):
        expected = {"dict[str, str]": "a table of name = value"}.get(target, f"a {target}")
        raise ConfigError(option, f"{raw!r} is not {expected}") from None


def _flattened(table: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A TOML table as dotted names: unquoted `driver.memory = "4g"` is a nested table in TOML."""
    flat: dict[str, str] = {}
    for name, value in table.items():
        if isinstance(value, dict):
            flat.update(_flattened(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = str(value)
    return flat


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
    tables: dict[str, dict[str, str]] = {"kafka": {}, "s3": {}, "spark": {}}
    for name, raw in (overrides or {}).items():
        table, dot, key = name.partition(".")
        if dot and table in tables:  # --set kafka.security.protocol=SASL_SSL, --set s3.endpoint=...
            tables[table][name if table == "spark" else key] = raw  # --set spark.driver.memory=4g
        else:
            values[name] = raw
    unknown = sorted(set(values) - set(types))
    if unknown:
        raise ConfigError(unknown[0], f"unknown option; known options are: {', '.join(types)}")
    typed = {name: _coerce(name, raw, types[name]) for name, raw in values.items()}
    for table, settings in tables.items():
        typed[table] = {
            name: _from_environment(f"{table}.{name}", str(value), environ)
            for name, value in {**typed.get(table, {}), **settings}.items()
        }
    return validated(JobConfig(**typed))


_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_WORDS = ("password", "secret", "jaas", "token", "key.pem", "credentials")


def _from_environment(option: str, value: str, environ: dict[str, str]) -> str:
    """`${VAR}` in a client setting is replaced by the environment variable, so secrets stay
    out of job files; an unset variable fails the start-up, naming the option."""

    def lookup(match: re.Match[str]) -> str:
        if match.group(1) not in environ:
            raise ConfigError(option, f"refers to the environment variable {match.group(1)}, which is not set")
        return environ[match.group(1)]

    return _ENV_REFERENCE.sub(lookup, value)


def is_secret(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_WORDS)


def secret_values(config: JobConfig) -> list[str]:
    """The values of the secret client settings, which the logs mask (logs.configure)."""
    return [value for table in (config.kafka, config.s3, config.spark) for name, value in table.items()
            if is_secret(name)]


def masked(config: JobConfig) -> dict[str, Any]:
    """The configuration as printable data: secrets of the client settings replaced by ***."""
    data = dataclasses.asdict(config)
    data["kafka"] = {name: "***" if is_secret(name) else value for name, value in config.kafka.items()}
    data["s3"] = {name: "***" if is_secret(name) else value for name, value in config.s3.items()}
    data["spark"] = {name: "***" if is_secret(name) else value for name, value in config.spark.items()}
    return data


def validated(config: JobConfig) -> JobConfig:
    """Checks that need no broker and no Spark; `preflight` does the others at start-up."""
    for check in (_check_names, _check_choices, _check_schema, _check_numbers, _check_required_text,
                  _check_client_settings):
        check(config)
    starting_offsets(config)
    return config


def _check_names(config: JobConfig) -> None:
    """The names Kafka, the checkpoint and the metrics take: the template's hook checks its
    answers with these same rules (identifiers.py)."""
    rules = {**dict.fromkeys(TOPIC_OPTIONS, topic_problem), "sink_id": sink_id_problem,
             "transactional_id_prefix": transactional_id_prefix_problem}
    for option, rule in rules.items():
        if (problem := rule(getattr(config, option))) is not None:
            raise ConfigError(option, f"{getattr(config, option)!r}: {problem}")
    topics = {option: getattr(config, option) for option in TOPIC_OPTIONS}
    for option, problem in topic_collisions(topics).items():  # the first collision
        raise ConfigError(option, f"{topics[option]!r}: {problem}")


def _check_choices(config: JobConfig) -> None:
    for option, allowed in (("delivery_guarantee", GUARANTEES), ("log_format", LOG_FORMATS),
                            ("publish_from", PUBLISH_FROM), ("on_rerun_mismatch", ON_RERUN_MISMATCH),
                            ("restart_strategy", RESTART_STRATEGIES)):
        if getattr(config, option) not in allowed:
            raise ConfigError(option, f"{getattr(config, option)!r} is not one of {', '.join(allowed)}")


def _check_schema(config: JobConfig) -> None:
    for field_name, field_type in config.schema.items():
        if "'" in field_name and '"' in field_name:
            raise ConfigError("schema", f"field {field_name!r}: a name may hold ' or \" but not both")
        if (problem := parse_column_problem(field_name)) is not None:
            raise ConfigError("schema", f"field {field_name!r}: {problem}")
        if field_type not in FIELD_TYPES:
            raise ConfigError("schema", f"field {field_name!r} has type {field_type!r}; use one of {FIELD_TYPES}")
    if config.key_field not in config.schema:
        raise ConfigError("key_field", f"{config.key_field!r} is not a field of the schema {sorted(config.schema)}")


POSITIVE_OPTIONS = ("trigger_interval_seconds", "max_offsets_per_trigger", "max_record_bytes", "commit_shards",
                    "shuffle_partitions", "commit_timeout_seconds")
NON_NEGATIVE_OPTIONS = ("state_ttl_seconds", "restart_attempts", "restart_delay_seconds", "marker_replication_factor",
                        "marker_min_insync_replicas", "kafka_outage_tolerance_seconds",
                        "foreign_transaction_tolerance_seconds", "restart_max_delay_seconds",
                        "failure_rate_interval_seconds")


def _check_numbers(config: JobConfig) -> None:
    for option in (*POSITIVE_OPTIONS, *NON_NEGATIVE_OPTIONS):
        if not math.isfinite(getattr(config, option)):  # NaN passes every comparison below
            raise ConfigError(option, f"must be a finite number, got {getattr(config, option)}")
    for option in POSITIVE_OPTIONS:
        if getattr(config, option) <= 0:
            raise ConfigError(option, f"must be positive, got {getattr(config, option)}")
    for option in NON_NEGATIVE_OPTIONS:
        if getattr(config, option) < 0:
            raise ConfigError(option, f"must not be negative, got {getattr(config, option)}")
    for option in ("ui_port", "metrics_port"):
        if not 0 <= getattr(config, option) <= 65535:
            raise ConfigError(option, f"must be a TCP port (1-65535), or 0 for off; got {getattr(config, option)}")
    if config.ui_port and config.ui_port == config.metrics_port:
        raise ConfigError("metrics_port", f"the Spark UI already uses port {config.ui_port} (ui_port)")


def _check_required_text(config: JobConfig) -> None:
    for option, hint in (("bootstrap_servers", ""), ("checkpoint_location", ""),
                         ("filter", "; use 'true' to count every event")):
        if not getattr(config, option).strip():
            raise ConfigError(option, f"must not be empty{hint}")
    if config.spark_master.startswith("k8s://") and _relative_path(config.checkpoint_location):
        raise ConfigError("checkpoint_location", f"{config.checkpoint_location!r} is a path on the driver pod's own "
                                                 "disk, gone with the pod: set it to shared storage (s3a://, hdfs://, "
                                                 "or an absolute path on a shared volume)")


def _relative_path(location: str) -> bool:
    return "://" not in location and not location.startswith(("/", "file:"))


def _check_client_settings(config: JobConfig) -> None:
    for name in config.kafka:
        if name in JOB_OWNED_CLIENT_SETTINGS:
            raise ConfigError(f"kafka.{name}", JOB_OWNED_CLIENT_SETTINGS[name])
    for name in config.s3:
        if name not in S3_SETTINGS:
            raise ConfigError(f"s3.{name}", f"unknown S3 setting; known: {', '.join(S3_SETTINGS)}")
    for name in config.spark:
        if not name.startswith("spark."):
            raise ConfigError("spark", f"{name!r}: a Spark setting's name starts with 'spark.'")
        if name in JOB_OWNED_SPARK_SETTINGS:
            raise ConfigError("spark", f"{name!r}: {JOB_OWNED_SPARK_SETTINGS[name]}")
    try:  # the Java client's form of the settings (Spark's source) is built when the query is
        java_client_options(config.kafka)
    except ValueError as error:
        raise ConfigError("kafka.sasl.mechanism", str(error)) from None


# The [kafka] table for Spark's Kafka source (the Java client), which validation builds once too.
# librdkafka settings the Java client spells differently or does not have.
_SASL_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_LIBRDKAFKA_ONLY = {"sasl.username", "sasl.password", "sasl.mechanisms", "ssl.ca.location"}


def java_client_options(settings: Mapping[str, str]) -> dict[str, str]:
    """The same settings as options of Spark's Kafka source: `kafka.`-prefixed, with librdkafka's
    SASL user and password turned into the Java client's JAAS line and a CA file into a PEM trust store."""
    java = {name: value for name, value in settings.items() if name not in _LIBRDKAFKA_ONLY}
    mechanism = settings.get("sasl.mechanism") or settings.get("sasl.mechanisms")
    if mechanism:
        java["sasl.mechanism"] = mechanism
    if "sasl.username" in settings and "sasl.jaas.config" not in settings:
        module = _SASL_LOGIN_MODULES.get((mechanism or "PLAIN").upper())
        if module is None:
            raise ValueError(f"sasl.mechanism {mechanism!r}: give the Java client's sasl.jaas.config in [kafka]")
        user, password = (_jaas_quoted(settings.get(n, "")) for n in ("sasl.username", "sasl.password"))
        java["sasl.jaas.config"] = f'{module} required username="{user}" password="{password}";'
    if "ssl.ca.location" in settings and "ssl.truststore.location" not in settings:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = settings["ssl.ca.location"]
    return {f"kafka.{name}": value for name, value in java.items()}


def _jaas_quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


# Client settings the job sets itself, because the guarantee depends on them.
JOB_OWNED_CLIENT_SETTINGS = {
    "bootstrap.servers": "set bootstrap_servers instead",
    "transactional.id": "derived from transactional_id_prefix and sink_id; the guarantee depends on it",
    "isolation.level": "always read_committed; the guarantee depends on it",
    "enable.idempotence": "set by the sink; the guarantee depends on it",
    "group.id": "the job keeps its offsets in the checkpoint, not in a consumer group",
}


# Spark settings the job sets from its own options, or that the checkpoint depends on.
JOB_OWNED_SPARK_SETTINGS = {
    "spark.master": "set spark_master instead",
    "spark.sql.shuffle.partitions": "set shuffle_partitions instead (fixed by the checkpoint)",
    "spark.sql.streaming.stateStore.providerClass": "the job's state is RocksDB; the checkpoint depends on it",
    "spark.ui.enabled": "set ui_port instead (0 = off)",
    "spark.ui.port": "set ui_port instead",
}


def starting_offsets(config: JobConfig) -> str | dict[int, int]:
    """`earliest`, `latest`, or Spark's JSON form for the input topic, {"<topic>": {"0": 42, "1": -2}}
    (-2 = earliest, -1 = latest); returned as {partition: offset}."""
    value = config.starting_offsets.strip()
    if value in ("earliest", "latest"):
        return value
    try:
        parsed = json.loads(value)
        topics = set(parsed)
        offsets = {int(partition): int(offset) for partition, offset in parsed[config.input_topic].items()}
    except (ValueError, AttributeError, TypeError, KeyError):
        raise ConfigError(
            "starting_offsets", f"{value!r} is not earliest, latest or Spark's JSON form "
            + json.dumps({config.input_topic: {"<partition>": "<offset>"}})
        ) from None
    if topics != {config.input_topic}:
        raise ConfigError("starting_offsets",
                          f"names topics {sorted(topics)}; the input topic is {config.input_topic!r}")
    if any(offset < -2 for offset in offsets.values()):
        raise ConfigError("starting_offsets", "an offset is >= 0, or -2 (earliest), or -1 (latest)")
    return offsets
