"""A checkpoint on S3 (`s3://` or `s3a://`, one location for Spark's checkpoint and the sink's
files), configured in one place: the `[s3]` table. From it come Spark's S3A settings (Hadoop's
connector, for the checkpoint), the AWS variables that the driver's pyarrow and boto3 read (for
the sink log), and the start-up check of the bucket. Executors only touch the checkpoint through
Spark, so no credentials travel to them outside Hadoop's settings."""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections.abc import Mapping
from pathlib import Path

from ..failures import ConfigError, JobFailure, Outcome

S3_SCHEMES = ("s3://", "s3a://")
# What each setting is called by the AWS SDKs (pyarrow, boto3) and by Hadoop's S3A connector.
_ENVIRONMENT = {"endpoint": "AWS_ENDPOINT_URL", "region": "AWS_REGION", "access_key_id": "AWS_ACCESS_KEY_ID",
                "secret_access_key": "AWS_SECRET_ACCESS_KEY"}
_S3A = {"endpoint": "fs.s3a.endpoint", "region": "fs.s3a.endpoint.region", "access_key_id": "fs.s3a.access.key",
        "secret_access_key": "fs.s3a.secret.key", "path_style_access": "fs.s3a.path.style.access"}


def on_s3(location: str) -> bool:
    return location.startswith(S3_SCHEMES)


def bucket_and_key(location: str) -> tuple[str, str]:
    """`s3a://bucket/a/b` -> ("bucket", "a/b")."""
    bucket, _, key = location.split("://", 1)[1].partition("/")
    return bucket, key.strip("/")


def environment(s3: Mapping[str, str]) -> dict[str, str]:
    """The AWS variables for the settings given (the others stay as the environment has them)."""
    return {_ENVIRONMENT[name]: value for name, value in s3.items() if name in _ENVIRONMENT}


def hadoop_aws_package() -> str:
    """Hadoop's S3A connector in the version of the Hadoop that this PySpark ships."""
    jars = Path(str(importlib.metadata.distribution("pyspark").locate_file("pyspark/jars")))
    client = next(jars.glob("hadoop-client-api-*.jar"), None)
    if client is None:
        raise ConfigError("checkpoint_location", f"no hadoop-client-api jar in {jars}: cannot match hadoop-aws to it")
    return f"org.apache.hadoop:hadoop-aws:{client.name.removeprefix('hadoop-client-api-').removesuffix('.jar')}"


def spark_conf(s3: Mapping[str, str]) -> dict[str, str]:
    """Spark settings for a checkpoint on S3: `s3://` through S3A too, S3A from the [s3] table.
    Spark redacts `secret` settings in its UI and logs."""
    conf = {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    conf.update({f"spark.hadoop.{_S3A[name]}": value for name, value in s3.items()})
    if s3.get("endpoint", "").startswith("http://"):
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    return conf


def use_in_this_process(s3: Mapping[str, str]) -> None:
    """The driver's pyarrow and boto3 read the AWS variables."""
    os.environ.update(environment(s3))


def check_bucket(location: str, s3: Mapping[str, str], timeout: float = 5.0) -> None:
    """Reach the bucket now, so that a wrong endpoint, bucket or credentials fails the start-up
    in seconds with one line naming the setting, not the first batch with a stack trace."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, _ = bucket_and_key(location)
    settings = {**{name: os.environ[variable] for name, variable in _ENVIRONMENT.items() if variable in os.environ},
                **s3}
    client = boto3.client(
        "s3", endpoint_url=settings.get("endpoint"), region_name=settings.get("region") or "us-east-1",
        aws_access_key_id=settings.get("access_key_id"), aws_secret_access_key=settings.get("secret_access_key"),
        config=Config(connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 1},
                      s3={"addressing_style": "path" if settings.get("path_style_access") == "true" else "auto"}))
    try:
        client.head_bucket(Bucket=bucket)
    except ClientError as error:
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 404:
            raise ConfigError("checkpoint_location", f"bucket {bucket!r} does not exist at "
                              f"{settings.get('endpoint') or 'AWS S3'}") from None
        if status in (401, 403):
            raise ConfigError("s3.access_key_id", f"the credentials are refused for bucket {bucket!r} "
                              f"(HTTP {status}): check s3.access_key_id and s3.secret_access_key") from None
        raise ConfigError("checkpoint_location", f"bucket {bucket!r}: {error}") from None
    except BotoCoreError as error:
        raise ConfigError("s3.endpoint", f"cannot reach {settings.get('endpoint') or 'AWS S3'} within "
                          f"{timeout:.0f}s ({error})") from None


class ConditionalWriteFailed(JobFailure, RuntimeError):
    """Another writer changed the object between this one's read and its write."""

    outcome = Outcome.RETRY


def _client():
    """One client per AWS settings, reused: the sink log writes through it twice per batch, and
    building a boto3 client costs far more than a request to the store."""
    return _client_for(tuple(os.environ.get(variable) for variable in _ENVIRONMENT.values()))


@functools.cache
def _client_for(settings: tuple[str | None, ...]):
    import boto3

    del settings  # only the cache key: boto3 reads the same AWS variables (use_in_this_process)
    return boto3.client("s3")


def etag(path: str) -> str | None:
    """The ETag of `bucket/key` (pyarrow's form of an S3 path), None when there is no such object."""
    from botocore.exceptions import ClientError

    bucket, _, key = path.partition("/")
    try:
        return _client().head_object(Bucket=bucket, Key=key)["ETag"]
    except ClientError as error:
        if error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
            return None
        raise


def put_if_unchanged(path: str, data: bytes, expected_etag: str | None) -> None:
    """Write `bucket/key` only if it is still as this writer last saw it: absent
    (`If-None-Match: *`) or with `expected_etag` (`If-Match`). S3 decides atomically, so of two
    writers that saw the same state, one wins and the other gets ConditionalWriteFailed."""
    from botocore.exceptions import ClientError

    bucket, _, key = path.partition("/")
    condition = {"IfMatch": expected_etag} if expected_etag else {"IfNoneMatch": "*"}
    try:
        _client().put_object(Bucket=bucket, Key=key, Body=data, **condition)
    except ClientError as error:
        if error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") in (409, 412):
            raise ConditionalWriteFailed(f"s3://{path} changed since it was read: another writer") from None
        raise
