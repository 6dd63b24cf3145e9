"""The checkpoint on a real S3 server (S3Proxy, the tools' s3_local, which the tests start and stop
like Kafka): Spark's checkpoint through Hadoop's S3A, the sink log through
pyarrow, all from the one `[s3]` table; exactly-once through a crash; and a wrong bucket,
endpoint or credentials failing at start-up, before Spark starts, with one line naming the setting."""

from __future__ import annotations

import signal
import uuid

import pytest

from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, PREPARED, LogEntry, SinkLog, SinkLogConflict
from {{ cookiecutter.package_name }}.storage import object_store

from harness import SECRET_VARIABLE, merged, on_s3, produce_sample

pytestmark = pytest.mark.integration


def test_a_checkpoint_on_s3_holds_exactly_once_through_a_crash(job, s3_server, monkeypatch):
    job.guarantee = "exactly-once"
    settings = on_s3(job, s3_server, monkeypatch)
    env = {SECRET_VARIABLE: s3_server.secret_key}
    sample = produce_sample(job, count=2000, seed=71, partitions=4)  # two batches: the second crashes
    crashed = job.run(fault=faults.AFTER_KAFKA_COMMIT, fault_batch=1, max_offsets_per_trigger="1000",
                      extra_env=env, **settings)
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout[-3000:]
    recovered = job.run(max_offsets_per_trigger="1000", extra_env=env, **settings)
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    assert s3_server.secret_key not in recovered.stdout

    kept, malformed = merged(sample)
    verdict = job.verify(kept, malformed)
    assert verdict.exactly_once, verdict.problems
    assert (verdict.lost, verdict.duplicated, verdict.wrong_answers, verdict.missing_updates) == (0, 0, 0, 0)
    bucket, prefix = object_store.bucket_and_key(job.checkpoint_location)
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]]
    assert any("/commits/" in key for key in keys), "Spark's checkpoint is not in the bucket"
    assert any(f"/sinks/{job.sink_id}/log/" in key for key in keys), "the sink's log is not in the bucket"


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        ({"bucket": "no-such-bucket"},
         "configuration option 'checkpoint_location': bucket 'no-such-bucket' does not exist"),
        ({"s3.endpoint": "http://127.0.0.1:1"}, "configuration option 's3.endpoint': cannot reach http://127.0.0.1:1"),
        ({"s3.access_key_id": "someone-else"}, "configuration option 's3.access_key_id': the credentials are refused"),
    ],
)
def test_a_wrong_bucket_endpoint_or_credentials_fails_before_spark_starts(job, s3_server, monkeypatch, wrong, message):
    produce_sample(job, count=10, seed=72, partitions=4)
    settings = on_s3(job, s3_server, monkeypatch, **{k: v for k, v in wrong.items() if k != "bucket"})
    if "bucket" in wrong:
        job.checkpoint_location = f"s3a://{wrong['bucket']}/checkpoints/counts"
    result = job.run(extra_env={SECRET_VARIABLE: s3_server.secret_key}, timeout=120, **settings)
    assert result.returncode == 2, result.stdout[-3000:]
    errors = [line for line in result.stdout.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {message}"), result.stdout[-3000:]
    assert "Traceback" not in result.stdout
    assert "spark" not in result.stdout.lower(), "Spark started before the check"


def test_two_drivers_cannot_both_write_a_batchs_log_entry(s3_server, monkeypatch):
    """The sink log on S3 writes conditionally (If-None-Match / If-Match on the ETag it read):
    of two drivers that saw batch 3's entry in the same state, the second one's write fails."""
    bucket = f"ckpt-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    s3 = {"endpoint": s3_server.endpoint, "region": s3_server.region, "access_key_id": s3_server.access_key,
          "secret_access_key": s3_server.secret_key}
    for name, value in object_store.environment(s3).items():
        monkeypatch.setenv(name, value)
    checkpoint = f"s3a://{bucket}/checkpoints/counts"
    entry = LogEntry(batch_id=3, status=PREPARED, transactional_ids=["t-0"], records=0)

    first, second = SinkLog(checkpoint, "sink"), SinkLog(checkpoint, "sink")
    first.write(entry)  # absent: its If-None-Match wins

    # The second driver read the entry before the first wrote it (absent): its write must fail.
    seen = object_store.etag
    monkeypatch.setattr(object_store, "etag", lambda path: None)
    with pytest.raises(SinkLogConflict, match="another job running with this sink_id"):
        second.write(LogEntry(**{**entry.__dict__, "transactional_ids": ["other-0"]}))
    monkeypatch.setattr(object_store, "etag", seen)

    committed = LogEntry(**{**entry.__dict__, "status": COMMITTED})
    first.write(committed)  # If-Match on the ETag it read: still its own entry
    assert second.read(3) == committed
