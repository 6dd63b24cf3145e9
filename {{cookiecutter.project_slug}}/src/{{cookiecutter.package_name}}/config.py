"""One typed configuration, read from the job file, the environment and `--set` flags,
validated before anything starts. Every error names the option it is about."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

from .failures import ConfigError
from .identifiers import (
    PARSE_COLUMNS,
    SINK_ID_MAX_LENGTH,
    TRANSACTIONAL_ID_PREFIX_MAX_LENGTH,
    parse_column_problem,
    sink_id_problem,
    topic_collisions,
    topic_problem,
    transactional_id_prefix_problem,
)
from .java_client import java_client_options

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
# A Kafka value's format (formats/): JSON, or Avro or Protobuf in a schema registry's wire format.
ValueFormat = Literal["json", "avro", "protobuf"]
# Where the answers' schema comes from: registered by the job at start, or registered already.
SchemaRegistration = Literal["register", "existing"]
GUARANTEES: tuple[str, ...] = get_args(Guarantee)
RESTART_STRATEGIES: tuple[str, ...] = get_args(RestartStrategyKind)
FIELD_TYPES = ("string", "int", "float", "bool")
LOG_FORMATS: tuple[str, ...] = get_args(LogFormat)
PUBLISH_FROM: tuple[str, ...] = get_args(PublishFrom)
ON_RERUN_MISMATCH: tuple[str, ...] = get_args(OnRerunMismatch)
VALUE_FORMATS: tuple[str, ...] = get_args(ValueFormat)
SCHEMA_REGISTRATIONS: tuple[str, ...] = get_args(SchemaRegistration)
TOPIC_OPTIONS = ("input_topic", "output_topic", "dead_letter_topic", "marker_topic")
# The [s3] table's settings (object_store.py); secret_access_key may be `${VAR}`, and is masked.
S3_SETTINGS = ("endpoint", "region", "access_key_id", "secret_access_key", "path_style_access")
# The options that are tables of settings: `--set <table>.<name>=...` sets one (a Spark setting by
# its full name, `--set spark.executor.memory=4g`), an environment variable replaces the table.
TABLE_OPTIONS = ("kafka", "s3", "spark", "schema_registry", "routes")


def option(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Any = dataclasses.MISSING) -> Any:
    """A JobConfig field with what it means (`doc`), which the configuration reference in
    docs/configuration.md shows beside its type, rule, default and environment variable (the
    tools' reference.py)."""
    return field(default=default, default_factory=factory, metadata={"doc": doc})


@dataclass(frozen=True)
class JobConfig:
    bootstrap_servers: str = option("127.0.0.1:9092", "Kafka brokers")
    kafka: dict[str, str] = option(
        factory=dict, doc="client settings for every Kafka client of the job and its tools, in librdkafka's names; "
        "`${VAR}` takes a value from the environment (Kafka client settings, below)")
    s3: dict[str, str] = option(
        factory=dict, doc="for a checkpoint on `s3://` or `s3a://`: where its bucket is and how to reach it, for "
        "Spark, the sink and the start-up checks (A checkpoint on S3, below)")
    spark: dict[str, str] = option(
        factory=dict, doc="Spark settings for the job's session, full names (`\"spark.driver.maxResultSize\" = "
        "\"2g\"`, `--set spark.executor.memory=4g`); under spark-submit its `--conf` values win for the "
        "SparkContext's")
    input_topic: str = option("{{ cookiecutter.input_topic }}", "the events; must exist (`topics create`)")
    output_topic: str = option("{{ cookiecutter.output_topic }}", "the answers; must exist (`topics create`)")
    dead_letter_topic: str = option("{{ cookiecutter.dead_letter_topic }}",
                                    "malformed and oversized events; must exist (`topics create`)")
    marker_topic: str = option(
        "{{ cookiecutter.marker_topic }}", "compacted topic with the sink's batch markers; created at start-up if "
        "missing (1 partition, `cleanup.policy=compact`), refused at start-up if it has more partitions or "
        "time-based deletion")
    marker_replication_factor: int = option(0, "replication of the marker topic when the job creates it; "
                                               "0 = min(3, brokers)")
    marker_min_insync_replicas: int = option(0, "its `min.insync.replicas`; 0 = min(2, replication)")
{%- if cookiecutter.query == "windowed-count" %}
    schema: dict[str, str] = option(factory=lambda: {"{{ cookiecutter.key_field }}": "string",
                                                     "{{ cookiecutter.event_time_field }}": "int"},
                                    doc="event fields and types; other fields are ignored")
{%- else %}
    schema: dict[str, str] = option(factory=lambda: {"{{ cookiecutter.key_field }}": "string"},
                                    doc="event fields and types; other fields are ignored")
{%- endif %}
    key_field: str = option("{{ cookiecutter.key_field }}", "the field the query keys its output by")
    filter: str = option("{{ cookiecutter.filter_expression | replace('\\', '\\\\') | replace('"', '\\"') }}",
                         "Spark SQL condition; the query takes only the events that match")
    max_record_bytes: int = option(65536, "larger values are dead letters")
    route: str = option(
        "", "a Spark SQL expression over an output record's fields (`key` and the answer's columns): the name of its "
        "route in `[routes]`; a record whose route is not there is a dead letter. Empty: every record to "
        "`output_topic`")
    routes: dict[str, str] = option(
        factory=dict, doc="route name = topic: where `route` sends records, each topic existing (`topics create`); a "
        "batch's records reach all of them in the batch's transactions")
    input_format: ValueFormat = option(
        "json", "the input's values: `json`, or `avro` or `protobuf` in the schema registry's wire format, read "
        "with the writer schema of each record's id (`input_subject`'s versions) into `schema`'s fields")
    input_message: str = option(
        "", "for `protobuf` input: the message the input's records hold, by full name (`package.Message`); empty: "
        "the first message of the subject's latest version")
    output_format: ValueFormat = option(
        "json", "the answers' values: `json`, or `avro` or `protobuf` in the registry's wire format "
        "(`output_schema` under `output_subject`); dead letters stay JSON")
    schema_registry: dict[str, str] = option(
        factory=dict, doc="for `avro` and `protobuf`: the schema registry client's settings in confluent-kafka's "
        "names: `url` (Confluent's REST API, e.g. Apicurio Registry's `.../apis/ccompat/v7`), `basic.auth.user.info` "
        "(`user:password`), `ssl.ca.location`; `${VAR}` takes a value from the environment")
    input_subject: str = option("", "the input's subject in the registry; empty: `<input_topic>-value` (the topic "
                                    "name strategy)")
    output_subject: str = option("", "the answers' subject; empty: `<output_topic>-value`")
    output_schema: str = option(
        "schemas/output.{{ 'proto' if cookiecutter.value_format == 'protobuf' else 'avsc' }}",
        "the answers' schema, a file: for `avro` a record of the answer's fields, then `batch_id` (long); for "
        "`protobuf` a `.proto` file whose first message has them, then `batch_id` (int64, numbered last); "
        "`{{ cookiecutter.package_name }} avro-schema` or `protobuf-schema` prints the one the query's answer needs")
    output_schema_registration: SchemaRegistration = option(
        "register", "`register`: the job registers `output_schema` under `output_subject` at start (a schema the "
        "registry calls incompatible fails the start); `existing`: it must be registered already")
    schema_registry_tolerance_seconds: float = option(
        120.0, "how long the registry may not answer, at start or when the input shows a new schema id, before the "
        "job fails")

    delivery_guarantee: Guarantee = option("{{ cookiecutter.delivery_guarantee }}",
                                           "`exactly-once` (2PC) or `at-least-once` (plain producer)")
    checkpoint_location: str = option("{{ cookiecutter.checkpoint_location }}",
                                      "Spark's checkpoint; the sink's log lives under it")
    sink_id: str = option("{{ cookiecutter.project_slug }}",
                          "identity of the sink: transactional ids, marker key, directory, metrics label")
    transactional_id_prefix: str = option("{{ cookiecutter.transactional_id_prefix }}",
                                          "transactional id = `<prefix>-<sink_id>-<shard>`")
    commit_shards: int = option(1, "commit shards phase 2 spreads a batch over: one Kafka transaction each, "
                                   "published by one Spark task each; fixed by the checkpoint (README: Limits of "
                                   "the guarantee)")
    commit_timeout_seconds: float = option(
        60.0, "time-out of each Kafka transaction call; a transaction gets 3 of them in all (produce, flush, commit "
        "retries) and `transaction.timeout.ms` = 4 × this")
    publish_from: PublishFrom = option(
        "auto", "where phase 2 publishes a batch from: `tasks` (one Spark task per commit shard), `driver` (the "
        "driver's producers, unless the batch exceeds `spark.driver.maxResultSize`), or `auto`: the driver for a "
        "batch expected to have at most 65,536 records and 8 MiB (its input records times the previous batch's "
        "records per input record, one for a run's first batch, and at least the previous batch's records), "
        "Spark tasks otherwise (docs/guarantee.md, step 2)")
    on_rerun_mismatch: OnRerunMismatch = option(
        "fail", "a batch re-run after a crash that computes other records than its first attempt, some of whose "
        "commit shards are already published: `fail` stops the job there (nothing more published; the batch would "
        "otherwise come from two computations), `warn` publishes the other shards from this computation and logs "
        "it (README: Limits of the guarantee)")

    trigger_interval_seconds: float = option({{ cookiecutter.trigger_interval_seconds }}, "micro-batch interval")
    max_offsets_per_trigger: int = option(200_000, "Spark's `maxOffsetsPerTrigger`: at most this many input "
                                                   "offsets per batch (transaction markers take offsets too)")
    starting_offsets: str = option(
        "earliest", "`earliest`, `latest`, or Spark's JSON `{\"{{ cookiecutter.input_topic }}\": {\"0\": 42, "
        "\"1\": -2}}` (-2 earliest, -1 latest); used only by a new checkpoint")
    fail_on_data_loss: bool = option(True, "fail when unread input was deleted by retention; false skips ahead")
    state_ttl_seconds: int = option(
{%- if cookiecutter.query == "count-by-key" %}
        {{ cookiecutter.state_ttl_seconds }}, "forget a key idle this long (0: never). Above 0 the answer runs in "
        "transformWithStateInPandas, which calls Python once per changed key and batch. Fixed by the checkpoint (a "
        "different operator; a savepoint changes it)")
{%- else %}
        {{ cookiecutter.state_ttl_seconds }}, "0 only: a state TTL expires a key's answer, which this query does not "
        "keep; above 0 is refused at start")
{%- endif %}
{%- if cookiecutter.query == "windowed-count" %}
    event_time_field: str = option("{{ cookiecutter.event_time_field }}",
                                   "the field with an event's time, an `int` of `[schema]` in epoch milliseconds; an "
                                   "event without it is a dead letter. Fixed by the checkpoint")
    window_seconds: int = option({{ cookiecutter.window_seconds }}, "length of the tumbling event-time windows the "
                                                                    "query counts in. Fixed by the checkpoint")
    allowed_lateness_seconds: int = option(
        {{ cookiecutter.allowed_lateness_seconds }}, "the watermark's delay: the watermark trails the latest event "
        "time of the batches before by this much; an event whose window ends at or before the watermark is late "
        "(a dead letter)")
{%- endif %}
    shuffle_partitions: int = option(4, "state partitions; fixed by the checkpoint once it exists")
    spark_master: str = option("local[2]", "Spark master")

    log_format: LogFormat = option("text", "`json`: every line of the job's log and of Spark's is a JSON object "
                                           "(docs/operations.md, Logs); `text`: for people")
    ui_port: int = option(
        4040, "the Spark UI (its Structured Streaming tab) and Spark's metrics in Prometheus format at "
        "`/metrics/prometheus` (the executors' at `/metrics/executors/prometheus`); 0 = off. If the port is taken, "
        "Spark takes the next free one (its log says which)")
    metrics_port: int = option(9464, "the sink's metrics in Prometheus format at "
                                     "`http://<metrics_host>:<port>/metrics` (docs/operations.md, Metrics); 0 = off; "
                                     "a port in use fails the start")
    metrics_host: str = option("0.0.0.0", "the address the sink's metrics are served on; `0.0.0.0`: every address, "
                                          "without authentication")

    kafka_outage_tolerance_seconds: float = option(
        120.0, "how long Kafka may be unreachable before the restart strategy counts a failure (docs/operations.md, "
        "Kafka outages), also at start-up when the checkpoint exists; 0 = every failure counts")
    foreign_transaction_tolerance_seconds: float = option(
        1200.0, "how long a batch waits for another producer's transaction left open on the marker topic (which "
        "hides the markers committed after it) before it fails; the broker aborts such a transaction within its "
        "`transaction.timeout.ms` (docs/guarantee.md, step 4)")
    restart_strategy: RestartStrategyKind = option("fixed-delay", "what a failed query does (docs/operations.md, "
                                                                  "Kafka outages)")
    restart_attempts: int = option(3, "restarts allowed (`failure-rate`: failures per interval)")
    restart_delay_seconds: float = option(5.0, "delay before a restart; `exponential-backoff` doubles it")
    restart_max_delay_seconds: float = option(60.0, "the most `exponential-backoff` waits")
    failure_rate_interval_seconds: float = option(
        300.0, "the `failure-rate` window; for `fixed-delay` and `exponential-backoff`, a run this long without "
        "failure starts the attempts afresh")

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == "exactly-once"

    @property
    def answer_topics(self) -> list[str]:
        """The topics the answers go to: the routed ones, or the output topic."""
        return sorted(set(self.routes.values())) if self.route else [self.output_topic]

    @property
    def uses_avro(self) -> bool:
        """Whether any of the job's values are Avro: it then needs spark-avro and the schema registry."""
        return "avro" in (self.input_format, self.output_format)

    @property
    def uses_protobuf(self) -> bool:
        """Whether any of the job's values are Protobuf: it then needs the job's codec and protobuf-java."""
        return "protobuf" in (self.input_format, self.output_format)

    @property
    def uses_registry(self) -> bool:
        return self.uses_avro or self.uses_protobuf

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
    tables: dict[str, dict[str, str]] = {table: {} for table in TABLE_OPTIONS}
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


def _from_environment(option: str, value: str, environ: dict[str, str]) -> str:
    """`${VAR}` in a client setting is replaced by the environment variable, so secrets stay
    out of job files; an unset variable fails the start-up, naming the option."""

    def lookup(match: re.Match[str]) -> str:
        if match.group(1) not in environ:
            raise ConfigError(option, f"refers to the environment variable {match.group(1)}, which is not set")
        return environ[match.group(1)]

    return _ENV_REFERENCE.sub(lookup, value)


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
    _check_routing(config)


def _check_routing(config: JobConfig) -> None:
    """`route` and `[routes]` come together; a routed topic is none of the job's other topics (it
    may be the output topic)."""
    if bool(config.route.strip()) != bool(config.routes):
        missing = "routes" if config.route.strip() else "route"
        raise ConfigError(missing, "`route` and `[routes]` come together: set both, or neither")
    others = {option: getattr(config, option) for option in TOPIC_OPTIONS if option != "output_topic"}
    for name, topic in config.routes.items():
        if (problem := topic_problem(topic)) is not None:
            raise ConfigError(f"routes.{name}", f"{topic!r}: {problem}")
        for _option, problem in topic_collisions({**others, "route": topic}).items():
            raise ConfigError(f"routes.{name}", f"{topic!r}: {problem}")
    if config.route and config.output_format != "json":
        raise ConfigError("route", "routes JSON answers only: with output_format avro or protobuf every topic would "
                                   "need a "
                                   "subject and schema of its own")


CHOICES = (("delivery_guarantee", GUARANTEES), ("log_format", LOG_FORMATS), ("publish_from", PUBLISH_FROM),
           ("on_rerun_mismatch", ON_RERUN_MISMATCH), ("restart_strategy", RESTART_STRATEGIES),
           ("input_format", VALUE_FORMATS), ("output_format", VALUE_FORMATS),
           ("output_schema_registration", SCHEMA_REGISTRATIONS))


def _check_choices(config: JobConfig) -> None:
    for option, allowed in CHOICES:
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
{%- if cookiecutter.query == "windowed-count" %}
    if config.schema.get(config.event_time_field) != "int":
        raise ConfigError("event_time_field", f"{config.event_time_field!r} must be a field of type int in the "
                                              f"schema (epoch milliseconds); the schema has {config.schema}")
    if config.event_time_field == config.key_field:
        raise ConfigError("event_time_field", f"{config.event_time_field!r} is the key_field; the window's time "
                                              "needs a field of its own")
{%- endif %}


PORT_OPTIONS = ("ui_port", "metrics_port")
POSITIVE_OPTIONS = ("trigger_interval_seconds", "max_offsets_per_trigger", "max_record_bytes", "commit_shards",
                    "shuffle_partitions", "commit_timeout_seconds"{% if cookiecutter.query == "windowed-count" %},
                    "window_seconds"{% endif %})
NON_NEGATIVE_OPTIONS = ({% if cookiecutter.query == "windowed-count" %}"allowed_lateness_seconds",
                        {% endif %}"state_ttl_seconds", "restart_attempts", "restart_delay_seconds", "marker_replication_factor",
                        "marker_min_insync_replicas", "kafka_outage_tolerance_seconds",
                        "foreign_transaction_tolerance_seconds", "restart_max_delay_seconds",
                        "schema_registry_tolerance_seconds",
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
    for option in PORT_OPTIONS:
        if not 0 <= getattr(config, option) <= 65535:
            raise ConfigError(option, f"must be a TCP port (1-65535), or 0 for off; got {getattr(config, option)}")
    if config.ui_port and config.ui_port == config.metrics_port:
        raise ConfigError("metrics_port", f"the Spark UI already uses port {config.ui_port} (ui_port)")


REQUIRED_TEXT = (("bootstrap_servers", ""), ("checkpoint_location", ""),
                 ("filter", "; use 'true' to count every event"))


def _check_required_text(config: JobConfig) -> None:
    for option, hint in REQUIRED_TEXT:
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
    if config.uses_registry and not config.schema_registry.get("url", "").strip():
        raise ConfigError("schema_registry.url", "required with input_format or output_format avro or protobuf: the "
                                                 "schema "
                                                 "registry's address, e.g. http://registry:8081")
    for name in config.spark:
        if not name.startswith("spark."):
            raise ConfigError("spark", f"{name!r}: a Spark setting's name starts with 'spark.'")
        if name in JOB_OWNED_SPARK_SETTINGS:
            raise ConfigError("spark", f"{name!r}: {JOB_OWNED_SPARK_SETTINGS[name]}")
    try:  # the Java client's form of the settings (Spark's source) is built when the query is
        java_client_options(config.kafka)
    except ValueError as error:
        raise ConfigError("kafka.sasl.mechanism", str(error)) from None


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


def option_rules() -> dict[str, list[str]]:
    """What each option must be, in words, made from what the checks above and preflight enforce
    (docs/configuration.md's table shows them)."""
    rules: dict[str, list[str]] = {name: [] for name in option_names()}
    for option in TOPIC_OPTIONS:
        rules[option] += ["a Kafka topic name: 1 to 249 of `a-z A-Z 0-9 . _ -`, not `.` or `..`",
                          "differs from the job's other topics (`.` and `_` count as the same)"]
    rules["sink_id"].append(f"1 to {SINK_ID_MAX_LENGTH} of `a-z A-Z 0-9 . _ -`, starting with a letter or digit")
    rules["transactional_id_prefix"].append(f"1 to {TRANSACTIONAL_ID_PREFIX_MAX_LENGTH} printable ASCII "
                                            "characters, without whitespace, quotes or backslashes")
    for option, allowed in CHOICES:
        rules[option].append("one of " + ", ".join(f"`{choice}`" for choice in allowed))
    rules["schema"] += ["types " + ", ".join(f"`{kind}`" for kind in FIELD_TYPES),
                        "no field named like a column the parse adds (" + ", ".join(
                            f"`{column}`" for column in PARSE_COLUMNS) + ")"]
    rules["key_field"].append("a field of `schema`")
    rules["route"] += ["with `[routes]`", "a Spark SQL expression over the output record's fields",
                       "with output_format `json`"]
    rules["routes"] += ["with `route`", "values: Kafka topic names, not input_topic, dead_letter_topic or "
                                        "marker_topic"]
    for option in POSITIVE_OPTIONS:
        rules[option].append("> 0")
    for option in NON_NEGATIVE_OPTIONS:
        rules[option].append("≥ 0")
    for option in PORT_OPTIONS:
        rules[option].append("a TCP port, or 0")
    rules["metrics_port"].append("not `ui_port`'s")
    for option, _hint in REQUIRED_TEXT:
        rules[option].append("not empty")
    rules["checkpoint_location"].append("with a `k8s://` master, shared storage (not a relative path)")
    rules["commit_timeout_seconds"].append("4 × this ≤ the brokers' `transaction.max.timeout.ms` (at start-up)")
    rules["starting_offsets"].append("offsets ≥ -2, of the input topic only")
    rules["kafka"].append("not " + ", ".join(f"`{name}`" for name in JOB_OWNED_CLIENT_SETTINGS) + " (the job's own)")
    rules["s3"].append("only " + ", ".join(f"`{name}`" for name in S3_SETTINGS))
    rules["schema_registry"].append("`url` required with a format `avro` or `protobuf`")
    rules["spark"] += ["names start with `spark.`",
                       "not " + ", ".join(f"`{name}`" for name in JOB_OWNED_SPARK_SETTINGS) + " (the job's own)"]
    return rules


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
