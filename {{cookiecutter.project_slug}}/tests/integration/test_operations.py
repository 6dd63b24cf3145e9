"""Operating the job: while it runs, the Spark UI lists its query, Spark's Prometheus endpoint
has the query's metrics, and the sink's Prometheus endpoint counts what a read_committed
consumer sees on the output and dead-letter topics; `status --check` turns red within two
triggers of a stuck sink."""

from __future__ import annotations

import json
import re
import signal
import time

import pytest

from {{ cookiecutter.package_name }}.pipeline import query
from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}.storage import checkpoint
from {{ cookiecutter.package_name }}_tools.processes import free_port, start_job
from {{ cookiecutter.package_name }}_tools.readback import Published, read_topic
from {{ cookiecutter.package_name }}_tools.verify import verify

from harness import CONFIG, EXACTLY_ONCE, expectation, fetch, produce_sample, stop, traceback_lines, wait_until

pytestmark = pytest.mark.integration


def samples(exposition: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Prometheus text format: (labels, value) of each of one metric's samples."""
    found = []
    for line in exposition.splitlines():
        match = re.match("^" + re.escape(name) + r"(\{.*\})?\s+(\S+)$", line)
        if match:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
            found.append((labels, float(match.group(2))))
    return found


def total(exposition: str, name: str, **labels: str) -> float:
    return sum(value for found, value in samples(exposition, name) if labels.items() <= found.items())


def test_the_ui_and_both_prometheus_endpoints_show_the_running_job(job):
    job.guarantee = EXACTLY_ONCE  # the sink's metrics come from the exactly-once sink's driver
    sample = produce_sample(job, count=3000, seed=23, partitions=4)
    expected, malformed = expectation(sample)
    ui_port, metrics_port = free_port(), free_port()
    settings = {**job.settings(), "ui_port": str(ui_port), "metrics_port": str(metrics_port),
                "metrics_host": "127.0.0.1", "max_offsets_per_trigger": "1000"}
    log_path = job.workdir / "operations.log"
    before = time.time()
    process = start_job(["run", "--until-idle", "240"], settings, job.workdir, log_path)
    try:
        # The independent reader first: every count and dead letter is published...
        def all_published() -> Published | None:
            published = job.published()
            return published if (expected.met_by(published)
                                  and len(published.dead_letters) == len(malformed)) else None

        published = wait_until(all_published, 240, "all published", interval=1, alive=process, log_path=log_path)
        output_records = len(read_topic(job.bootstrap_servers, job.output_topic))
        dead_letters = len(read_topic(job.bootstrap_servers, job.dead_letter_topic))
        assert output_records >= len(expected.keys()) and dead_letters == len(malformed)

        # ...and the sink's endpoint counts the same records.
        sink = fetch(f"http://127.0.0.1:{metrics_port}/metrics")
        ours = {"sink_id": job.sink_id}
        published_records = "eos_sink_records_published_total"
        assert total(sink, published_records, **ours, topic=job.output_topic) == output_records, sink
        assert total(sink, published_records, **ours, topic=job.dead_letter_topic) == dead_letters, sink
        last_batch = samples(sink, "eos_sink_last_committed_batch")
        assert [labels for labels, _ in last_batch] == [{**ours, "shard": "0"}] and last_batch[0][1] >= 2, sink
        assert total(sink, "eos_sink_phase2_seconds_count", **ours) >= 3, sink  # 3,000 events, ≤ 1,000 a batch
        lag = samples(sink, "eos_input_lag_records")
        assert len(lag) == 4 and sum(value for _, value in lag) == 0, sink
        assert total(sink, "eos_sink_commit_failures_total", **ours) == 0, sink
        assert before <= total(sink, "eos_sink_last_commit_timestamp_seconds", **ours) <= time.time(), sink

        # Spark's own windows: the streaming tab lists the query, and Spark's Prometheus servlet
        # has its metrics (the namespace is the app name; the source is the query's name).
        page = fetch(f"http://127.0.0.1:{ui_port}/StreamingQuery/")
        assert job.sink_id in page, page[:2000]
        spark_metrics = fetch(f"http://127.0.0.1:{ui_port}/metrics/prometheus")
        query_name = re.sub(r"\W", "_", job.sink_id)
        streaming = [line for line in spark_metrics.splitlines() if f"spark_streaming_{query_name}_" in line]
        assert any("inputRate" in line for line in streaming), spark_metrics[:3000]
        state_rows = [float(line.split()[-1]) for line in streaming if "states_rowsTotal_Value" in line]
        if not query.KEEPS_STATE:  # no state store: no rows (Spark's gauge, where present, says 0)
            assert not any(state_rows), streaming
        elif CONFIG.state_ttl_seconds == 0:  # Spark's aggregation: a row per key, and per partition with dead letters
            partitions = {letter["source_partition"] for letter in published.dead_letters}
            assert state_rows == [len(expected.keys()) + len(partitions)], streaming
        else:  # the Python operator keeps its own layout
            assert state_rows and state_rows[0] >= len(expected.keys()), streaming
        executors = fetch(f"http://127.0.0.1:{ui_port}/metrics/executors/prometheus")
        assert "metrics_executor_" in executors, executors[:2000]
    finally:
        stopped = stop(process, signal.SIGINT)  # Ctrl-C in a terminal: the whole foreground group
    log = log_path.read_text()
    assert stopped == 0 and "Traceback" not in log, log[-3000:]


def test_status_check_turns_red_within_two_triggers_of_a_stuck_sink(job):
    """A sink that hangs with its transaction open (phase 2, before the Kafka commit): a probe
    with --max-batch-age = 2 × trigger is green while batches flow and red 2 triggers after the
    last commit; the job killed and run again, nothing is lost or doubled."""
    job.guarantee = EXACTLY_ONCE
    trigger, stuck_batch = 2.0, 4
    sample = produce_sample(job, count=4000, seed=29, partitions=4)
    expected, malformed = expectation(sample)
    job.options.update(trigger_interval_seconds=str(trigger), max_offsets_per_trigger="500")  # 8 batches
    env = {faults.POINT_VARIABLE: faults.BEFORE_KAFKA_COMMIT, faults.BATCH_VARIABLE: str(stuck_batch),
           faults.MODE_VARIABLE: "hang", faults.LOG_VARIABLE: str(job.fault_log)}
    log_path = job.workdir / "stuck.log"
    process = start_job(["run"], job.settings(), job.workdir, log_path, env)
    try:
        wait_until(lambda: checkpoint.committed_batches(job.checkpoint_location), 240, "a batch committed",
                   interval=0.2, alive=process, log_path=log_path)
        flowing = job.health(2 * trigger)
        assert flowing["healthy"] and flowing["lag_total"] > 0, flowing  # input waits, batches flow

        wait_until(job.fault_log.exists, 240, "the commit hung", interval=0.2, alive=process, log_path=log_path)
        stuck_since = job.fault_log.stat().st_mtime
        assert job.fired_faults() == [f"fault injection: hang at {faults.BEFORE_KAFKA_COMMIT} in batch {stuck_batch}"]
        time.sleep(max(0.0, stuck_since + 2 * trigger + 0.5 - time.time()))
        stuck = job.health(2 * trigger)
        assert not stuck["healthy"] and stuck["last_committed_batch"] == stuck_batch - 1, stuck
        assert any(problem.startswith("stuck: input waits") for problem in stuck["problems"]), stuck
    finally:
        stop(process, signal.SIGKILL)

    result = job.run()  # the stuck transaction is aborted by the next driver; the batch runs again
    assert result.returncode == 0, result.stdout
    verdict = verify(job.published(), expected, malformed)
    assert verdict.exactly_once, verdict.problems


def test_json_logs_have_an_object_per_batch_and_per_failure_and_restart(job):
    """log_format = "json": the job's lines and Spark's are JSON objects; a batch's object has its
    figures, matching what the independent reader finds; each failure, the restart and the exit
    have theirs, and no object a stack trace (batch 1 fails on every attempt; one restart is
    allowed; the exit is the last line)."""
    job.guarantee = EXACTLY_ONCE
    produce_sample(job, count=2000, seed=41, partitions=4)
    result = job.run(fault=faults.BATCH_COMPUTED, fault_batch=1, extra_env={faults.MODE_VARIABLE: "raise"},
                     log_format="json", max_offsets_per_trigger="1000", restart_attempts="1",
                     restart_delay_seconds="0")
    assert result.returncode == 1, result.stdout[-3000:]
    objects = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert all({"ts", "level", "logger", "msg"} <= o.keys() for o in objects)
    spark_lines = [o for o in objects if not o["logger"].startswith("{{ cookiecutter.package_name }}")]
    assert spark_lines, "Spark's own lines are JSON too"
    events = [o for o in objects if "event" in o]
    failures = [e["error"] for e in events if e["event"] == "failure"]
    assert len(failures) == 2 and all("InjectedFault: fault injection: batch_computed in batch 1" in f
                                      for f in failures), failures
    assert [e["delay_seconds"] for e in events if e["event"] == "restart"] == [0.0]
    (exit_event,) = [e for e in events if e["event"] == "exit"]
    assert exit_event["msg"].startswith("giving up: 2 failures; restart_attempts is 1")
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("{") and json.loads(last) == exit_event, result.stdout[-3000:]
    found = traceback_lines(result.stdout)  # each failure in its one object; the stacks at debug only
    assert not found, f"{len(found)} lines with a traceback, e.g. {found[:3]}"

    (batch,) = [e for e in events if e["event"] == "batch"]  # batch 0; batch 1 never completes
    assert batch["batch_id"] == 0 and batch["input_rows"] == 1000
    assert {"addBatch", "triggerExecution"} <= batch["duration_ms"].keys() and batch["lag"] == 1000
    published = job.published()
    assert batch["output_records"] == published.records() > 0
    assert batch["dead_letters"] == len(published.dead_letters)
    other = [line for line in result.stdout.splitlines() if line.strip() and not line.startswith("{")]
    assert not [line for line in other if " INFO " in line or " WARN " in line], other[:20]
