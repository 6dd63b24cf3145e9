"""The job as a least-privileged principal: over TLS with SASL/SCRAM-SHA-512, on brokers that
refuse whatever no ACL allows (the session's kafka_cluster, its SASL_SSL listeners), with exactly the
ACLs the README lists, it runs exactly-once, and its password (from the environment) shows
nowhere; without any one required ACL it stops in one line naming it, having published nothing,
and an ACL revoked while it runs stops it the same way at the next batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
)
from confluent_kafka.admin import ResourceType as Resource

from {{ cookiecutter.package_name }}_tools.kafka_local import secured
from {{ cookiecutter.package_name }}_tools.kafka_local.cluster import LocalKafkaCluster
from {{ cookiecutter.package_name }}_tools.processes import free_port, job_command
from {{ cookiecutter.package_name }}_tools.verify import verify

from harness import JobUnderTest, answer, expectation, produce_sample, stop, wait_until

pytestmark = [pytest.mark.kafka_cluster, pytest.mark.integration]
PASSWORD_VARIABLE = "TEST_KAFKA_SCRAM_PASSWORD"
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


@dataclass(frozen=True)
class Grant:
    option: str  # the option a refusal names
    kind: Resource
    name: str
    pattern: ResourcePatternType
    operation: AclOperation
    required: bool = True  # False: the job runs without it (the check it serves is skipped, with a warning)

    def binding(self, principal: str) -> AclBinding:
        return AclBinding(self.kind, self.name, self.pattern, principal, "*", self.operation, AclPermissionType.ALLOW)


def job_grants(job: JobUnderTest) -> dict[str, Grant]:
    """What the job's principal needs, as the README lists it, by a label."""
    transactional_ids = f"{job.settings()['transactional_id_prefix']}-{job.sink_id}"
    return {
        "input READ": Grant("input_topic", Resource.TOPIC, job.input_topic, LITERAL, AclOperation.READ),
        "output WRITE": Grant("output_topic", Resource.TOPIC, job.output_topic, LITERAL, AclOperation.WRITE),
        "dead letters WRITE": Grant("dead_letter_topic", Resource.TOPIC, job.dead_letter_topic, LITERAL,
                                    AclOperation.WRITE),
        "markers READ": Grant("marker_topic", Resource.TOPIC, job.marker_topic, LITERAL, AclOperation.READ),
        "markers WRITE": Grant("marker_topic", Resource.TOPIC, job.marker_topic, LITERAL, AclOperation.WRITE),
        "markers CREATE": Grant("marker_topic", Resource.TOPIC, job.marker_topic, LITERAL, AclOperation.CREATE),
        "markers DESCRIBE_CONFIGS": Grant("marker_topic", Resource.TOPIC, job.marker_topic, LITERAL,
                                          AclOperation.DESCRIBE_CONFIGS),
        "transactional ids WRITE": Grant("transactional_id_prefix", Resource.TRANSACTIONAL_ID, transactional_ids,
                                         PREFIXED, AclOperation.WRITE),
        "cluster DESCRIBE_CONFIGS": Grant("commit_timeout_seconds", Resource.BROKER, "kafka-cluster", LITERAL,
                                          AclOperation.DESCRIBE_CONFIGS, required=False),
    }


def test_the_job_runs_exactly_once_with_the_acls_the_readme_lists_and_no_more_and_keeps_its_secret(
        kafka_cluster, cluster_job, tmp_path):
    """The least-privilege run, its password from the environment, logging JSON, its UI on: the
    password shows nowhere a team would look (the log, `config`, the UI's environment page, its
    SQL and streaming pages and their REST API, every file of the checkpoint with the sink log)."""
    cluster, job = kafka_cluster, cluster_job
    assert set(REQUIRED) == {label for label, grant in job_grants(job).items() if grant.required}
    _, password, settings = principal_with(cluster, job_grants(job).values())
    sample = produce_sample(job, count=1500, seed=5, partitions=2)

    job.bootstrap_servers = cluster.secured_bootstrap_servers  # from here on the job sees only SASL_SSL
    settings["kafka.sasl.password"] = "${" + PASSWORD_VARIABLE + "}"
    ui_port = free_port()
    env = {PASSWORD_VARIABLE: password}
    process, log_path = job.start(extra_env=env, until_idle=10, log_format="json", ui_port=str(ui_port), **settings)
    try:
        ui = f"http://127.0.0.1:{ui_port}"
        # While Spark starts, the UI answers every page with "Spark is starting up": wait for real ones.
        pages = [wait_until(lambda: _page(f"{ui}/environment/", "Spark Properties"), 120, "the Spark UI",
                            alive=process, log_path=log_path)]
        listed = wait_until(lambda: _page(f"{ui}/api/v1/applications", '"id"'), 60, "the UI's REST API",
                            alive=process, log_path=log_path)
        applications = [app["id"] for app in json.loads(listed)]
        pages += [answer(f"{ui}/api/v1/applications/{app}/environment") or "" for app in applications]
        # Once a batch has run: the plans with the Kafka source (the SQL tab, its REST API) and the query's page.
        plans = f"{ui}/api/v1/applications/{applications[0]}/sql?details=true&planDescription=true"
        pages += [wait_until(lambda: _page(plans, "KafkaScan"), 120, "a batch's plan in the UI", alive=process,
                             log_path=log_path),
                  answer(f"{ui}/SQL/") or "", answer(f"{ui}/StreamingQuery/") or ""]
        assert process.wait(300) == 0, log_path.read_text()[-3000:]
    finally:
        if process.poll() is None:
            stop(process, signal.SIGKILL)
    shown = subprocess.run(job_command(["config"], {**job.settings(), **settings}), capture_output=True, text=True,
                           env={**os.environ, **env}, cwd=tmp_path, timeout=120)
    assert shown.returncode == 0 and "sasl.password" in shown.stdout, shown.stdout + shown.stderr
    places = {"the job's log": log_path.read_text(), "`config`": shown.stdout + shown.stderr,
              **{f"the UI ({n})": page for n, page in enumerate(pages)},
              **{str(path): path.read_bytes().decode(errors="replace")
                 for path in job.checkpoint.rglob("*") if path.is_file()}}
    assert "Spark Properties" in pages[0] and any("sparkProperties" in page for page in pages[1:]), pages
    assert [place for place, text in places.items() if password in text] == []
    assert any("sinks" in place for place in places), "the scan found no sink log"

    job.bootstrap_servers = cluster.bootstrap_servers  # read back independently, as a super user
    expected, malformed = expectation(sample)
    verdict = verify(job.published(), expected, malformed)
    assert verdict.exactly_once, verdict.problems


def _page(url: str, ready: str) -> str | None:
    """The page, once it holds `ready`."""
    page = answer(url)
    return page if page is not None and ready in page else None


def principal_with(cluster: LocalKafkaCluster, grants: Iterable[Grant]) -> tuple[str, str, dict[str, str]]:
    """A new SCRAM user with exactly `grants`: (user, password, its `kafka.*` settings for SASL_SSL)."""
    assert cluster.certificates is not None
    user, password = f"job-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    secured.add_users(cluster.bootstrap_servers, [(user, password)])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_acls([grant.binding(f"User:{user}") for grant in grants]).values():
        future.result(timeout=30)
    settings = {f"kafka.{name}": value
                for name, value in secured.client_settings(cluster.certificates, user, password).items()}
    return user, password, settings


# Each refused in a test of its own (job_grants(job): those marked required).
REQUIRED = ("input READ", "output WRITE", "dead letters WRITE", "markers READ", "markers WRITE", "markers CREATE",
            "markers DESCRIBE_CONFIGS", "transactional ids WRITE")


@pytest.mark.parametrize("missing", REQUIRED)
def test_without_one_acl_the_job_fails_in_one_line_naming_it_and_publishes_nothing(
        kafka_cluster, cluster_job, missing):
    cluster, job = kafka_cluster, cluster_job
    grants = job_grants(job)
    refused = grants.pop(missing)
    user, _, settings = principal_with(cluster, grants.values())
    produce_sample(job, count=500, seed=5, partitions=2)
    job.bootstrap_servers = cluster.secured_bootstrap_servers
    result = job.run(timeout=180, restart_strategy="none", **settings)
    assert result.returncode == 2, result.stdout[-3000:]
    last = result.stdout.strip().splitlines()[-1]
    operation = refused.operation.name
    assert last.startswith(f"error: configuration option '{refused.option}': Kafka principal User:{user} "
                           f"may not {operation}"), last
    assert refused.name in last, last

    job.bootstrap_servers = cluster.bootstrap_servers
    published = job.published(settle=0)
    assert not published.answers and not published.dead_letters, "published without every ACL"


def test_the_transactional_ids_acl_revoked_while_the_job_runs_stops_it_at_the_next_batch(kafka_cluster, cluster_job):
    """Kafka judges the transactional ids at each transaction: WRITE on them revoked after the
    start-up checks stops the job at its next batch, in the same one line, and what it published
    is exactly the batches before."""
    cluster, job = kafka_cluster, cluster_job
    grants = job_grants(job)
    user, _, settings = principal_with(cluster, grants.values())
    first = produce_sample(job, count=500, seed=7, partitions=2)
    job.bootstrap_servers = cluster.secured_bootstrap_servers
    process, log_path = job.start(until_idle=120, **settings)
    job.bootstrap_servers = cluster.bootstrap_servers  # the tests' side: a super user
    try:
        expected, malformed = expectation(first)
        wait_until(lambda: verify(job.published(settle=0), expected, malformed).exactly_once, 180,
                   "the first input published", alive=process, log_path=log_path)
        revoked = grants["transactional ids WRITE"].binding(f"User:{user}")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        as_filter = AclBindingFilter(revoked.restype, revoked.name, revoked.resource_pattern_type, revoked.principal,
                                     revoked.host, revoked.operation, revoked.permission_type)
        for future in admin.delete_acls([as_filter]).values():
            assert len(future.result(timeout=30)) == 1
        produce_sample(job, count=500, seed=8, partitions=2)
        assert process.wait(180) == 2, log_path.read_text()[-3000:]
    finally:
        if process.poll() is None:
            stop(process, signal.SIGKILL)
    last = log_path.read_text().strip().splitlines()[-1]
    assert last.startswith(f"error: configuration option 'transactional_id_prefix': Kafka principal User:{user} "
                           f"may not WRITE the transactional ids {job.settings()['transactional_id_prefix']}-"), last
    verdict = verify(job.published(), expected, malformed)
    assert verdict.exactly_once, verdict.problems
