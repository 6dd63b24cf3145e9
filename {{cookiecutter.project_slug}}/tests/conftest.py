"""Shared fixtures: one real Kafka broker for the whole session, fresh topics per test; a
three-broker cluster for the tests that ask for one."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}.spark.session import spark_session
from {{ cookiecutter.package_name }}_tools.chaos.plan import PROFILES
from {{ cookiecutter.package_name }}_tools.kafka_io import create_topics
from {{ cookiecutter.package_name }}_tools.kafka_local import (
    KafkaHandle,
    KafkaUnavailable,
    LocalKafkaCluster,
    cluster_launcher,
    provide_kafka,
)
from {{ cookiecutter.package_name }}_tools.routing import RouteOf, spark_route
from {{ cookiecutter.package_name }}_tools.s3_local import S3Server, S3Unavailable
from {{ cookiecutter.package_name }}_tools.sample import Keep, spark_filter
from {{ cookiecutter.package_name }}_tools.schema_registry import RegistryUnavailable, SchemaRegistry

from harness import (
    CONFIG,
    EXACTLY_ONCE,
    TEST_JVM_OPTIONS,
    JobUnderTest,
    announce,
    registry_options,
    serving,
    started_twice,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--chaos-profile", default="quick", choices=sorted(PROFILES),
                     help="the chaos profile tests/chaos runs (the chaos command's --profile)")
    parser.addoption("--crash-points", metavar="POINT,...",
                     help="the crash tests at each point of the commit protocol (locally and on the cluster) "
                          "fire only these points (sink/faults.py's names), each in every place it runs; default: all")


@pytest.fixture
def named_crash_points(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """The points a crash test at each point fires: every one of faults.POINTS, or those that
    `--crash-points` names (a name that is none of them stops the run, listing them)."""
    named = request.config.getoption("--crash-points")
    if named is None:
        return faults.POINTS
    points = {point.strip() for point in named.split(",") if point.strip()}
    unknown = points - set(faults.POINTS)
    if not points or unknown:
        raise pytest.UsageError(f"--crash-points {named!r}: {', '.join(sorted(unknown)) or 'no point'} is not one "
                                f"of {', '.join(faults.POINTS)}")
    return tuple(point for point in faults.POINTS if point in points)


def pytest_configure(config: pytest.Config) -> None:
    """Every driver JVM that spark-submit starts for the tests (the jobs, the tools' commands,
    the unit tests' session) reads SPARK_SUBMIT_OPTS; the cluster suite's master and workers,
    SPARK_DAEMON_JAVA_OPTS; every broker the tools start, KAFKA_OPTS."""
    for variable in ("SPARK_SUBMIT_OPTS", "SPARK_DAEMON_JAVA_OPTS", "KAFKA_OPTS"):
        os.environ[variable] = f"{os.environ.get(variable, '')} {TEST_JVM_OPTIONS}".strip()


@pytest.fixture(scope="session")
def kafka(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaHandle]:
    with ExitStack() as stack:
        handle = started_twice(request, lambda: stack.enter_context(provide_kafka(tmp_path_factory.mktemp("kafka"))),
                               KafkaUnavailable, "this test needs a real Kafka broker")
        announce(request, handle.describe())
        yield handle


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[LocalKafkaCluster]:
    """Three secured brokers, containers or processes as KAFKA_PROVIDER says (cluster_launcher)."""
    cluster = LocalKafkaCluster(tmp_path_factory.mktemp("kafka-cluster"), secured=True, launcher=cluster_launcher())
    yield from serving(request, cluster, KafkaUnavailable, "these tests need a three-broker Kafka cluster",
                       lambda cluster, seconds: f"kafka: three-broker cluster, {cluster.launcher} nodes, at "
                                                f"{cluster.bootstrap_servers}, up in {seconds:.1f}s")


@pytest.fixture
def cluster_job(kafka_cluster: LocalKafkaCluster, tmp_path: Path, event_filter: Keep,
                format_options: dict[str, str]) -> JobUnderTest:
    """An exactly-once job on the three-broker cluster, with fresh topics there (4 input partitions)."""
    names = {kind: f"{kind}-{uuid.uuid4().hex[:10]}" for kind in ("events", "counts", "dead")}
    create_topics(kafka_cluster.bootstrap_servers, {names["events"]: 4, names["counts"]: 2, names["dead"]: 1})
    return JobUnderTest(bootstrap_servers=kafka_cluster.bootstrap_servers, workdir=tmp_path,
                        input_topic=names["events"], output_topic=names["counts"], dead_letter_topic=names["dead"],
                        keep=event_filter, guarantee=EXACTLY_ONCE, options=format_options)


@pytest.fixture(scope="session")
def s3_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3 server (S3Proxy, the tools' s3_local), started for the tests that ask for one."""
    yield from serving(request, S3Server(tmp_path_factory.mktemp("s3"), jvm_options=TEST_JVM_OPTIONS), S3Unavailable,
                       "this test needs a real S3 server",
                       lambda server, seconds: f"s3: S3Proxy at {server.endpoint}, up in {seconds:.1f}s")


@pytest.fixture(scope="session")
def schema_registry(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistry]:
    """A real schema registry (Apicurio, the tools' schema_registry), one per session, for the tests
    that ask for one."""
    yield from serving(request, SchemaRegistry(tmp_path_factory.mktemp("registry"), jvm_options=TEST_JVM_OPTIONS),
                       RegistryUnavailable, "this test needs a real schema registry",
                       lambda registry, seconds: f"schema registry: Apicurio at {registry.url}, up in {seconds:.1f}s")


@pytest.fixture
def format_options(request: pytest.FixtureRequest) -> dict[str, str]:
    """The job's options that its values' formats need here: none for JSON; for Avro or Protobuf
    (job.toml's formats), the session's schema registry and the project's output schema (registry_options)."""
    if not CONFIG.uses_registry:
        return {}
    return registry_options(request.getfixturevalue("schema_registry").url, CONFIG.output_format)


@pytest.fixture
def new_topic(kafka: KafkaHandle) -> Callable[..., str]:
    """Create a uniquely named topic and return its name."""
    def create(prefix: str = "t", partitions: int = 1, config: dict[str, str] | None = None) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        create_topics(kafka.bootstrap_servers, {name: partitions}, config)
        return name

    return create


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI a skipped test is a failure: an integration test that did not run proves nothing."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        reporter.write_line(f"FAILED: {len(skipped)} test(s) skipped; CI does not allow skips.", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def batch_spark() -> Iterator[SparkSession]:
    """A local Spark in batch mode, for what the tests evaluate with Spark SQL apart from the job."""
    spark = spark_session("expected-counts", "local[1]", shuffle_partitions=1)
    yield spark
    spark.stop()


@pytest.fixture(scope="session")
def event_filter(batch_spark: SparkSession) -> Keep:
    """The configured filter (the template's answer), evaluated by Spark SQL: the expected counts
    follow the rendered configuration, not a hard-coded key."""
    return spark_filter(batch_spark, CONFIG.filter, CONFIG.schema)


@pytest.fixture(scope="session")
def answer_routes(batch_spark: SparkSession) -> RouteOf:
    """A routing job's `route`, evaluated by Spark SQL over the model's answers (routing.py)."""
    return spark_route(batch_spark)


@pytest.fixture
def job(kafka: KafkaHandle, new_topic: Callable[..., str], tmp_path: Path, event_filter: Keep,
        answer_routes: RouteOf, format_options: dict[str, str]) -> JobUnderTest:
    """A job wired to fresh input (4 partitions), output and dead-letter topics, its values in
    job.toml's formats."""
    return JobUnderTest(
        bootstrap_servers=kafka.bootstrap_servers,
        workdir=tmp_path,
        input_topic=new_topic("events", partitions=4),
        output_topic=new_topic("counts", partitions=2),
        dead_letter_topic=new_topic("dead", partitions=1),
        keep=event_filter,
        options=format_options,
        route_of=answer_routes,
    )
