from __future__ import annotations

import json

import pytest

from {{ cookiecutter.package_name }}.config import (
    ENV_PREFIX,
    ConfigError,
    JobConfig,
    load_config,
    starting_offsets,
)
from {{ cookiecutter.package_name }}.java_client import java_client_options
from {{ cookiecutter.package_name }}.masking import masked


def test_later_sources_win(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('input_topic = "from-file"\noutput_topic = "out-file"\ncommit_shards = 2\n')
    environ = {ENV_PREFIX + "OUTPUT_TOPIC": "out-env", "KAFKA_BOOTSTRAP_SERVERS": "kafka:9092"}
    config = load_config(path, {"commit_shards": "3"}, environ)
    assert (config.input_topic, config.output_topic, config.commit_shards) == ("from-file", "out-env", 3)
    assert config.bootstrap_servers == "kafka:9092"


@pytest.mark.parametrize(
    ("overrides", "option", "problem"),
    [
        ({"trigger_interval_seconds": "soon"}, "trigger_interval_seconds", "'soon' is not a float"),
        ({"trigger_interval_seconds": "0"}, "trigger_interval_seconds", "must be positive"),
        ({"commit_shards": "1.5"}, "commit_shards", "is not a int"),
        ({"fail_on_data_loss": "perhaps"}, "fail_on_data_loss", "is not a bool"),
        ({"delivery_guarantee": "maybe"}, "delivery_guarantee", "is not one of exactly-once, at-least-once"),
        ({"on_rerun_mismatch": "ignore"}, "on_rerun_mismatch", "is not one of fail, warn"),
        ({"publish_from": "executors"}, "publish_from", "is not one of auto, tasks, driver"),
        ({"restart_strategy": "pray"}, "restart_strategy", "is not one of"),
        ({"input_topic": "bad topic!"}, "input_topic", "'bad topic!': must be a Kafka topic name"),
        ({"output_topic": ".."}, "output_topic", "must be a Kafka topic name"),
        ({"output_topic": "{{ cookiecutter.input_topic }}"}, "output_topic", "must differ from input_topic"),
        ({"marker_topic": "{{ cookiecutter.input_topic }}"}, "marker_topic", "must differ from input_topic"),
        ({"key_field": "size"}, "key_field", "is not a field of the schema"),
        ({"schema": '{"color": "string", "size": "decimal"}'}, "schema", "has type 'decimal'"),
        ({"schema": '{"color": "string", "offset": "int"}'}, "schema", "'offset': the parse adds a column"),
        ({"starting_offsets": "yesterday"}, "starting_offsets", "is not earliest, latest"),
        ({"starting_offsets": '{"0": 1}'}, "starting_offsets", "is not earliest, latest or Spark's JSON form"),
        ({"starting_offsets": '{"other": {"0": 1}}'}, "starting_offsets", "is not earliest, latest"),
        ({"starting_offsets": '{"{{ cookiecutter.input_topic }}": {"0": -3}}'}, "starting_offsets", "-2 .earliest"),
        ({"kafka.isolation.level": "read_uncommitted"}, "kafka.isolation.level", "always read_committed"),
        ({"kafka.sasl.mechanism": "GSSAPI", "kafka.sasl.username": "u"}, "kafka.sasl.mechanism", "sasl.jaas.config"),
        ({"kafka.sasl.password": "${NO_SUCH_VARIABLE_X}"}, "kafka.sasl.password", "NO_SUCH_VARIABLE_X, which is not"),
        ({"spark.sql.shuffle.partitions": "8"}, "spark", "set shuffle_partitions instead"),
        ({"spark": '{"driver.memory": "4g"}'}, "spark", "starts with 'spark.'"),
        ({"filter": "  "}, "filter", "must not be empty"),
        ({"spark_master": "k8s://https://kubernetes.default.svc:443", "checkpoint_location": "checkpoints"},
         "checkpoint_location", "a path on the driver pod's own disk"),
        ({"ui_port": "70000"}, "ui_port", "must be a TCP port"),
        ({"metrics_port": "-1"}, "metrics_port", "must be a TCP port"),
        ({"ui_port": "9000", "metrics_port": "9000"}, "metrics_port", "the Spark UI already uses port 9000"),
        ({"spark.ui.port": "4041"}, "spark", "set ui_port instead"),
        ({"no_such_option": "1"}, "no_such_option", "unknown option"),
    ],
)
def test_bad_values_name_their_option(overrides, option, problem):
    with pytest.raises(ConfigError, match=problem) as raised:
        load_config(None, overrides, environ={})
    assert raised.value.option == option
    assert str(raised.value).startswith(f"configuration option '{option}'")


def test_a_missing_or_broken_file_is_reported(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml", environ={})
    broken = tmp_path / "job.toml"
    broken.write_text("input_topic = ")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(broken, environ={})


def test_the_rendered_job_file_is_valid():
    from pathlib import Path

    config = load_config(Path(__file__).parents[2] / "job.toml", environ={})
    assert config.key_field in config.schema


def test_client_settings_take_secrets_from_the_environment_and_never_print_them(tmp_path):
    job_file = tmp_path / "job.toml"
    job_file.write_text('[kafka]\n"security.protocol" = "SASL_PLAINTEXT"\n"sasl.password" = "${SASL_SECRET}"\n')
    config = load_config(job_file, {"kafka.sasl.username": "alice"}, environ={"SASL_SECRET": "s3cr3t"})
    assert config.kafka == {"security.protocol": "SASL_PLAINTEXT", "sasl.password": "s3cr3t", "sasl.username": "alice"}
    shown = json.dumps(masked(config))
    assert "s3cr3t" not in shown and '"sasl.password": "***"' in shown and "SASL_PLAINTEXT" in shown


def test_spark_settings_from_the_file_and_the_command_line(tmp_path):
    """Full Spark names; TOML's unquoted dotted keys (nested tables) read the same as quoted ones."""
    job_file = tmp_path / "job.toml"
    job_file.write_text('[spark]\n"spark.executor.memory" = "2g"\nspark.driver.maxResultSize = "512m"\n')
    config = load_config(job_file, {"spark.sql.streaming.metricsEnabled": "true"}, environ={})
    assert config.spark == {"spark.executor.memory": "2g", "spark.driver.maxResultSize": "512m",
                            "spark.sql.streaming.metricsEnabled": "true"}


def test_starting_offsets_in_sparks_form():
    value = '{"{{ cookiecutter.input_topic }}": {"0": 42, "1": -2}}'
    assert starting_offsets(load_config(None, {"starting_offsets": value}, environ={})) == {0: 42, 1: -2}


def test_the_java_client_gets_the_same_settings():
    options = java_client_options({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                   "sasl.username": "al\"ice", "sasl.password": "pw", "ssl.ca.location": "/ca.pem"})
    assert options["kafka.security.protocol"] == "SASL_PLAINTEXT"
    assert options["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="al\\"ice" password="pw";')
    assert options["kafka.ssl.truststore.type"] == "PEM" and options["kafka.ssl.truststore.location"] == "/ca.pem"
    assert "kafka.sasl.password" not in options and "kafka.sasl.username" not in options


def test_a_job_file_written_from_settings_configures_what_the_settings_do(tmp_path):
    """The tests' job files (tools' write_job_file, for jobs submitted from a file as deployments
    submit them) hold the same options as the `--set` flags they are written from."""
    from {{ cookiecutter.package_name }}_tools.job_file import write_job_file

    settings = {"commit_shards": "3", "fail_on_data_loss": "false", "trigger_interval_seconds": "0.5",
                "schema": json.dumps({**JobConfig().schema, "amount": "int"}), "key_field": "{{ cookiecutter.key_field }}",
                "filter": "color <> 'x\\\\y' AND \"a\" = \"a\"\x7f", "checkpoint_location": "s3a://b/c",
                "s3.endpoint": "http://127.0.0.1:9000", "s3.secret_access_key": "${S3_SECRET}",
                "kafka.security.protocol": "SASL_PLAINTEXT", "spark.executor.memory": "2g"}
    environ = {"S3_SECRET": "s3cr3t"}
    from_file = load_config(write_job_file(tmp_path / "job.toml", settings), environ=environ)
    assert from_file == load_config(None, settings, environ=environ)
    assert from_file.s3["secret_access_key"] == "s3cr3t" and from_file.spark == {"spark.executor.memory": "2g"}


def test_routing_takes_a_route_and_its_topics_together_and_refuses_what_would_collide(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('route = "key"\n[routes]\nred = "counts-red"\nblue = "counts-blue"\n')
    config = load_config(path, environ={})
    assert config.routes == {"red": "counts-red", "blue": "counts-blue"}
    assert config.answer_topics == ["counts-blue", "counts-red"]
    assert load_config(None, {"route": "key", "routes.red": "counts-red"}, environ={}).routes == {"red": "counts-red"}
    assert load_config(None, {}, environ={}).answer_topics == [load_config(None, {}, environ={}).output_topic]
    for settings, option in (({"route": "key"}, "routes"), ({"routes.red": "counts-red"}, "route"),
                             ({"route": "key", "routes.red": "bad topic"}, "routes.red"),
                             ({"route": "key", "routes.red": "events", "input_topic": "events"}, "routes.red"),
                             ({"route": "key", "routes.red": "counts-red", "output_format": "avro",
                               "schema_registry.url": "http://registry:8081"}, "route")):
        with pytest.raises(ConfigError, match=f"configuration option '{option}'"):
            load_config(None, settings, environ={})

