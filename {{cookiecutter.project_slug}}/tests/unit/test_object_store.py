"""The [s3] table: one place for Spark's S3A settings, the AWS variables of pyarrow and boto3,
and the masking of the secret; `s3a://` read by pyarrow as `s3://`."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.config import ConfigError, load_config
from {{ cookiecutter.package_name }}.masking import masked
from {{ cookiecutter.package_name }}.storage import object_store
from {{ cookiecutter.package_name }}.storage.files import filesystem

S3 = {"endpoint": "http://127.0.0.1:9000", "region": "eu-west-1", "access_key_id": "job",
      "secret_access_key": "${S3_SECRET}", "path_style_access": "true"}


def test_the_s3_table_reaches_spark_and_the_aws_variables_with_the_secret_from_the_environment():
    overrides = {"checkpoint_location": "s3a://bucket/ckpt", **{f"s3.{k}": v for k, v in S3.items()}}
    config = load_config(None, overrides, environ={"S3_SECRET": "hunter2"})
    assert config.s3["secret_access_key"] == "hunter2"
    assert masked(config)["s3"]["secret_access_key"] == "***"

    conf = object_store.spark_conf(config.s3)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.secret.key"] == "hunter2"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"  # an http:// endpoint
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"  # s3:// through S3A too
    assert not any(name.startswith("spark.executorEnv.") for name in conf)  # executors reach S3 through S3A only
    assert object_store.environment(config.s3) == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "job",
        "AWS_SECRET_ACCESS_KEY": "hunter2"}


def test_an_unknown_s3_setting_or_a_missing_secret_variable_names_the_option():
    with pytest.raises(ConfigError, match=r"configuration option 's3\.endpoint_url': unknown S3 setting"):
        load_config(None, {"s3.endpoint_url": "http://x"}, environ={})
    with pytest.raises(ConfigError, match=r"configuration option 's3\.secret_access_key'.*S3_SECRET"):
        load_config(None, {"s3.secret_access_key": "${S3_SECRET}"}, environ={})


def test_pyarrow_reads_s3a_locations_as_s3(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")  # never contacted: only the mapping is checked
    fs, path = filesystem("s3a://bucket/checkpoints/counts")
    assert fs.type_name == "s3" and path == "bucket/checkpoints/counts"
    assert object_store.bucket_and_key("s3a://bucket/checkpoints/counts") == ("bucket", "checkpoints/counts")


def test_hadoop_aws_matches_the_hadoop_that_pyspark_ships():
    assert object_store.hadoop_aws_package().startswith("org.apache.hadoop:hadoop-aws:3.")
