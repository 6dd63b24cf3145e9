"""Savepoints: stop a running job with a savepoint, change its parallelism, its commit shards
and its filter, resume it from the savepoint in a new checkpoint while events keep arriving,
and check what a read_committed consumer sees against the input: events before the
savepoint's offsets counted with the old filter, events after them with the new one. Then
the same through a SIGKILL while the savepoint is written, and while the resumed job runs its
first batch."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from {{ cookiecutter.package_name }}.savepoints import read_manifest
from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}.storage import object_store
from {{ cookiecutter.package_name }}_tools.processes import start_job
from {{ cookiecutter.package_name }}_tools.readback import read_positions
from {{ cookiecutter.package_name }}_tools.sample import SampleInput
from {{ cookiecutter.package_name }}_tools.value_formats import input_values
from {{ cookiecutter.package_name }}_tools.verify import Expected, Verdict, verify

from harness import (
    CONFIG,
    EXACTLY_ONCE,
    SECRET_VARIABLE,
    expectation,
    model,
    on_s3,
    produce_sample,
    stop,
    wait_until,
)

pytestmark = pytest.mark.integration

NEW_FILTER = "true"  # after the savepoint every well-formed event counts, the old filter's rejects too
PARTITIONS = 4


def shown_answers(rows: list[dict]) -> dict[str, dict]:
    """`savepoint inspect --json`'s keys as the model's answers: each key's published fields (its
    expiry and null fields left out, as the output record leaves them)."""
    return {row["key"]: {name: value for name, value in row.items() if name != "expires_at_ms" and value is not None}
            for row in rows}


class Stream(threading.Thread):
    """Events keep arriving: a small sample every 0.3 s until stopped."""

    def __init__(self, job, seed: int) -> None:
        super().__init__(daemon=True)
        self.job, self.seed = job, seed
        self.samples: list[SampleInput] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.seed += 1
            self.samples.append(produce_sample(self.job, count=60, seed=self.seed, partitions=PARTITIONS))
            self.done.wait(0.3)

    def stop(self) -> list[SampleInput]:
        self.done.set()
        self.join(30)
        return self.samples


def expected_after_savepoint(job, samples: list[SampleInput], savepoint_offsets: dict[str, int]
                             ) -> dict[str, dict[str, object]]:
    """From the input as Kafka holds it, through the query's model: below the savepoint's offsets
    the old filter decides (the values it keeps, evaluated apart from the job), from them on the
    new one ("true")."""
    malformed = {value for sample in samples for value in sample.malformed_values}
    events = input_values(job.config())
    kept = []
    for partition, offset, value in read_positions(job.bootstrap_servers, job.input_topic):
        if value is None or value in malformed:
            continue
        before = offset < savepoint_offsets[str(partition)]
        if before and value not in job.counted_values:
            continue
        kept.append(events.event(value))
    return Expected.of(model, kept, "upsert")


def cli(job, arguments: list[str], settings: dict[str, str], name: str, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess:
    log_path = job.workdir / f"{name}.log"
    process = start_job(arguments, settings, job.workdir, log_path, env)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        stop(process, signal.SIGKILL)
        raise AssertionError(f"{arguments[:2]} did not finish within {timeout}s; log: {log_path}") from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout=log_path.read_text())


def wait_for(job, wanted: Expected, process: subprocess.Popen, log_path: Path,
             timeout: float = 300) -> None:
    wait_until(lambda: wanted.met_by(job.published()), timeout, "all published", interval=1,
               alive=process, log_path=log_path)


def run_changed_job_from_a_savepoint(job, crash_create: bool = False, crash_first_batch: tuple[str, ...] = (),
                                     second_savepoint: bool = False, ttl_after: int | None = None
                                     ) -> tuple[Verdict, dict]:
    """`crash_first_batch`: the resumed job is SIGKILLed at each of these points of its first
    batch in turn, each restart running that batch again; `ttl_after`: the resumed job's
    state_ttl_seconds (None: the configured one, as before)."""
    job.guarantee = EXACTLY_ONCE
    before = {**job.settings(), "shuffle_partitions": "4", "commit_shards": "1", "max_offsets_per_trigger": "500"}
    first = produce_sample(job, count=2000, seed=41, partitions=PARTITIONS)
    log_before = job.workdir / "before.log"
    old_job = start_job(["run", "--until-idle", "600"], before, job.workdir, log_before)
    stream = Stream(job, seed=1000)
    try:
        wait_for(job, expectation(first)[0], old_job, log_before)
        stream.start()
        time.sleep(3)
        savepoint = job.workdir / "savepoint"
        if crash_create:  # SIGKILL after the state is written, before the manifest
            crashed = cli(job, ["savepoint", "create", "--to", str(savepoint)], before, "create-crashed",
                          {faults.POINT_VARIABLE: faults.SAVEPOINT_STATE_WRITTEN})
            assert crashed.returncode == -signal.SIGKILL, crashed.stdout[-3000:]
            assert (savepoint / "state").exists() and not (savepoint / "manifest.json").exists()
        created = cli(job, ["savepoint", "create", "--to", str(savepoint)], before, "create")
        assert created.returncode == 0, created.stdout[-3000:]
        assert old_job.wait(60) == 0, "the job did not stop for the savepoint"
        assert "stop requested (savepoint to" in log_before.read_text()
        manifest = read_manifest(str(savepoint))
        time.sleep(2)  # events keep arriving between the savepoint and the restore

        after = {**before, "shuffle_partitions": "8", "commit_shards": "2", "filter": NEW_FILTER,
                 "checkpoint_location": str(job.workdir / "checkpoint-after")}
        if ttl_after is not None:
            after["state_ttl_seconds"] = str(ttl_after)
        resume = ["run", "--from-savepoint", str(savepoint), "--until-idle", "600"]
        for k, point in enumerate(crash_first_batch):
            crashed = cli(job, resume, after, f"after-crashed-{k}", {faults.POINT_VARIABLE: point,
                                                                     faults.BATCH_VARIABLE: "0"})
            assert crashed.returncode == -signal.SIGKILL, f"{point}: {crashed.stdout[-3000:]}"
        log_after = job.workdir / "after.log"
        new_job = start_job(resume, after, job.workdir, log_after)
        # Events keep arriving once the resumed job runs, not only while it starts.
        wait_until(lambda: " started (" in log_after.read_text(), 240, "the resumed query started",
                   alive=new_job, log_path=log_after)
        time.sleep(2)
        samples = [first, *stream.stop()]
        wanted = expected_after_savepoint(job, samples, manifest.source_offsets[job.input_topic])
        wait_for(job, wanted, new_job, log_after)
        if second_savepoint:  # a savepoint of the resumed job holds the whole counts, not its own part
            again = cli(job, ["savepoint", "create", "--to", str(job.workdir / "savepoint-2")], after, "create-2")
            assert again.returncode == 0, again.stdout[-3000:]
            assert new_job.wait(60) == 0, "the resumed job did not stop for the second savepoint"
            shown = cli(job, ["savepoint", "inspect", str(job.workdir / "savepoint-2"), "--json", "--limit", "1000"],
                        after, "inspect-2")
            second = json.loads(shown.stdout[shown.stdout.index("{"):])
            assert (second["generation"], second["sink_id"]) == (1, f"{job.sink_id}.g1")
            assert shown_answers(second["first_keys"]) == wanted.answers
        else:
            assert stop(new_job) == 0, log_after.read_text()[-3000:]
    finally:
        stream.done.set()
        for process in (old_job, locals().get("new_job")):
            if process is not None and process.poll() is None:
                stop(process, signal.SIGKILL)
    malformed = [value for sample in samples for value in sample.malformed_values]
    assert not (mismatches := job.batch_header_mismatches()), mismatches[:5]  # the resumed job's too
    return verify(job.published(), wanted, malformed), json.loads((savepoint / "manifest.json").read_text())


def test_a_changed_and_rescaled_job_resumes_from_a_savepoint_on_the_other_counting_operator(job):
    """Changed in filter, shuffle partitions and commit shards, and moved from the configured
    counting operator to the other one: Spark's aggregation (state_ttl_seconds = 0) to the TTL
    operator (transformWithStateInPandas, its counts seeded as its initial state) or back. Nothing
    lost or doubled; the second savepoint reads the new operator's state."""
    other = 3600 if CONFIG.state_ttl_seconds == 0 else 0
    verdict, manifest = run_changed_job_from_a_savepoint(job, second_savepoint=True, ttl_after=other)
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated) == (0, 0)
    assert manifest["config"]["shuffle_partitions"] == 4 and manifest["keys"] > 0
    assert manifest["config"]["state_ttl_seconds"] == CONFIG.state_ttl_seconds
    second = read_manifest(str(job.workdir / "savepoint-2"))
    assert second.config["state_ttl_seconds"] == other
    expiries = pq.read_table(job.workdir / "savepoint-2" / "state").column("expires_at_ms").to_pylist()
    if other:  # a TTL from the restore on: every count expires about one TTL after it
        assert all(manifest["created_at"] + other - 60 < expiry / 1000 < time.time() + other for expiry in expiries)
    else:
        assert set(expiries) == {None}


def test_crashes_while_saving_and_in_the_first_resumed_batch_lose_and_double_nothing(job):
    """One savepoint through a SIGKILL while it is written (after the state, before the manifest),
    then its resumed job SIGKILLed in its first batch once computed and once after its Kafka
    commit: one scenario, each restart running the batch the last one died in."""
    verdict, _ = run_changed_job_from_a_savepoint(
        job, crash_create=True, crash_first_batch=(faults.BATCH_COMPUTED, faults.AFTER_KAFKA_COMMIT))
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated) == (0, 0)


def test_a_savepoint_in_a_bucket_resumes_a_job_whose_checkpoints_are_there_too(job, s3_server, monkeypatch):
    """Checkpoints and savepoint on S3 (S3Proxy): create from the stopped job, inspect, resume in a
    new checkpoint with more shuffle partitions; the counts go on from the savepoint's."""
    job.guarantee = EXACTLY_ONCE
    s3 = on_s3(job, s3_server, monkeypatch)
    env = {SECRET_VARIABLE: s3_server.secret_key}
    before = {**job.settings(), **s3, "shuffle_partitions": "2"}
    first = produce_sample(job, count=1000, seed=51, partitions=PARTITIONS)
    ran = cli(job, ["run", "--until-idle", "3"], before, "before", env)
    assert ran.returncode == 0, ran.stdout[-3000:]

    bucket, _ = object_store.bucket_and_key(job.checkpoint_location)
    savepoint = f"s3a://{bucket}/savepoints/one"
    created = cli(job, ["savepoint", "create", "--to", savepoint], before, "create", env)
    assert created.returncode == 0, created.stdout[-3000:]
    shown = cli(job, ["savepoint", "inspect", savepoint, "--json", "--limit", "100000"], before, "inspect", env)
    assert shown.returncode == 0, shown.stdout[-3000:]
    saved = json.loads(shown.stdout[shown.stdout.index("{"):])
    assert shown_answers(saved["first_keys"]) == expectation(first)[0].answers
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket, Prefix="savepoints/one/")["Contents"]]
    assert "savepoints/one/manifest.json" in keys and any(key.endswith(".parquet") for key in keys)

    second = produce_sample(job, count=1000, seed=52, partitions=PARTITIONS)
    after = {**before, "shuffle_partitions": "4", "checkpoint_location": f"s3a://{bucket}/checkpoints/counts-v2"}
    resumed = cli(job, ["run", "--from-savepoint", savepoint, "--until-idle", "3"], after, "after", env)
    assert resumed.returncode == 0, resumed.stdout[-3000:]
    assert s3_server.secret_key not in created.stdout + shown.stdout + resumed.stdout
    expected, malformed = expectation(first, second)
    verdict = verify(job.published(), expected, malformed)
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated) == (0, 0)
