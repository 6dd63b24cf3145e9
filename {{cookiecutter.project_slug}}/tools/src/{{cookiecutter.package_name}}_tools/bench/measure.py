"""One contender, measured on its own fresh topics with the same events as the others:

1. warm-up: `warmup` events, then the contender starts; once their counts are visible the
   contender is up (startup_s) and the measurement begins;
2. throughput: the backlog, produced in one transaction, becomes visible to the contender
   (read_committed) at one instant t0; events/s = backlog / (t1 − t0), t1 being when the
   output first shows counts that include every event of the backlog;
3. latency: events at a fixed rate for a while; per output record, visible time − produce
   time of the event that made the count true (stats.output_latencies);
4. recovery (optional): events keep coming, the driver's process group is SIGKILLed, the same
   command restarts on the same checkpoint; recovery = kill → first output record of a batch
   newer than every batch visible before the kill. Afterwards every count must be exact.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }}.config import JobConfig

from ..kafka_io import create_topics, delete_topics
from ..value_formats import JSON, AvroValues, ProtobufValues, Values
from .contender_process import Contender
from .profile import progress_profile, read_progress, sink_log_profile, sink_stages_profile
from .stats import contender_result, distribution, events_per_second, output_latencies
from .workload import (
    EventStream,
    Keys,
    OutputTail,
    RateProducer,
{%- if cookiecutter.query == "windowed-count" %}
    event_time,
{%- endif %}
    produce_backlog,
    produce_plain,
)


def _epoch_ms(timestamp: str | None) -> float:
    """Spark's progress timestamp (ISO 8601, UTC) as epoch milliseconds."""
    if not timestamp:
        return 0.0
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000


@dataclass(frozen=True)
class Profile:
    events: int = 1_000_000
    partitions: int = 8
    keys: int = 8
    warmup: int = 2_000
    rate: float = 500.0
    latency_seconds: float = 30.0
    trigger_seconds: float = 0.5
    max_per_batch: int = 50_000
    shuffle_partitions: int = 2
    commit_shards: int = 1
    publish_from: str = "auto"
    latency_rounds: int = 1
    plain_commit_ms: float = 100.0
    seed: int = 6
    timeout: float = 420.0
    record_bytes: int = 0  # each event padded to about this many bytes of JSON (0: as it comes, ~60 bytes)
    value_format: str = "json"  # the input's and the output's values: json, or avro or protobuf under `registry`
    registry: str = ""  # the schema registry's URL, for avro and protobuf

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _samples(latencies: list[float], points: int = 200) -> list[float]:
    """A sorted, thinned copy (ms) for the CDF plot."""
    ordered = sorted(v * 1000 for v in latencies)
    if len(ordered) <= points:
        return [round(v, 2) for v in ordered]
    return [round(ordered[round(i * (len(ordered) - 1) / (points - 1))], 2) for i in range(points)]


def driver_cpu(before: float | None, after: float | None, records: int) -> dict[str, float | None]:
    """The driver's Python CPU seconds while the backlog drained, and per million output records."""
    if before is None or after is None or records <= 0:
        return {"driver_cpu_s": None, "driver_cpu_s_per_million_records": None}
    return {"driver_cpu_s": round(after - before, 2),
            "driver_cpu_s_per_million_records": round((after - before) / records * 1e6, 2)}


def add_backlog_run(into: dict[str, Any], run: dict[str, Any], round_number: int, position: int) -> None:
    """Add one run's backlog throughput to a contender's result: `throughput.runs` lists every
    run (round, position in that round's order), `eps` and `seconds` are their medians."""
    measured = run.get("throughput")
    if run.get("error") and run is not into:
        into["error"] = into.get("error") or f"round {round_number}: {run['error']}"
    if not measured:
        return
    runs = [*((into.get("throughput") or {}).get("runs") or []),
            {"round": round_number, "position": position, "eps": measured["eps"], "seconds": measured["seconds"]}]
    into["throughput"] = {"events": measured["events"],
                          "seconds": round(statistics.median(r["seconds"] for r in runs), 3),
                          "eps": round(statistics.median(r["eps"] for r in runs), 1), "runs": runs}


def add_latency_run(into: dict[str, Any], run: dict[str, Any], round_number: int, position: int) -> None:
    """Add one run's latency phase to a contender's result: `latency.rounds` lists each run's p50
    and p99 (round, position in that round's order); `ms` and `cdf_ms` describe every output
    record of all of them together. One 30 s window is ~60 batches, and its p50 moved by a
    fifth from run to run on a two-core machine; the rounds alternate order as the backlog's do."""
    measured, latency = run.get("latency"), into.get("latency")
    if not measured or not latency:
        return
    rounds = latency.setdefault("rounds", [])
    if run is not into:
        latency["samples_s"] = [*latency.get("samples_s", []), *measured.get("samples_s", [])]
        latency["events"] += measured["events"]
        latency["records"] = len(latency["samples_s"])
        latency["ms"] = distribution(latency["samples_s"], 1000)
        latency["cdf_ms"] = _samples(latency["samples_s"])
    rounds.append({"round": round_number, "position": position, "p50": measured["ms"]["p50"],
                   "p99": measured["ms"]["p99"]})


def drop_samples(result: dict[str, Any]) -> dict[str, Any]:
    """`result` without its latency phase's raw figures (kept for add_latency_run), which the
    results' JSON does not carry: `cdf_ms` thins them."""
    (result.get("latency") or {}).pop("samples_s", None)
    return result


class Run:
    def __init__(self, name: str, bootstrap: str, profile: Profile, workdir: Path) -> None:
        self.name, self.bootstrap, self.profile = name, bootstrap, profile
        suffix = uuid.uuid4().hex[:8]
        self.workdir = workdir / f"{name}-{suffix}"
        self.workdir.mkdir(parents=True)
        self.input, self.output, self.dead = f"bench-in-{suffix}", f"bench-out-{suffix}", f"bench-dead-{suffix}"
        self.marker, self.sink_id = f"bench-markers-{suffix}", f"bench-{name.replace('_', '-')}-{suffix}"
        self.checkpoint = self.workdir / "checkpoint"
        self.progress_file = self.workdir / "progress.jsonl"
        self.key_field = JobConfig().key_field
        self.keys = Keys.of(profile.keys)
        self.stream = EventStream(self.keys, self.key_field, profile.seed
                                  {%- if cookiecutter.query == "windowed-count" %}, event_time(JobConfig()){% endif %},
                                  values=self._values(self.input, {self.key_field: "string", "seq": "int",
                                                                   "ts_ms": "float"}),
                                  record_bytes=profile.record_bytes)
        self.result = contender_result(name)

    def _values(self, topic: str, fields: dict[str, str]) -> Values:
        """A topic's format in this run: JSON, or Avro or Protobuf under the topic's subject."""
        if self.profile.value_format == "protobuf":
            return ProtobufValues({"url": self.profile.registry}, f"{topic}-value", fields)
        if self.profile.value_format != "avro":
            return JSON
        return AvroValues({"url": self.profile.registry}, f"{topic}-value", fields)

    def _avro_settings(self) -> dict[str, str]:
        """The job's options for Avro or Protobuf in and out, under the topics' subjects, its answers'
        schema the project's."""
        value_format = self.profile.value_format
        if value_format == "json":
            return {}
        schema = Path({{ cookiecutter.package_name }}.__file__).resolve().parents[2] / "schemas" / (
            "output.proto" if value_format == "protobuf" else "output.avsc")
        return {"input_format": value_format, "output_format": value_format,
                "schema_registry.url": self.profile.registry, "output_schema": str(schema)}

    def command(self) -> list[str]:
        p = self.profile
        python = [sys.executable, "-m"]
        if self.name in ("eos", "alos", "spark_kafka_job"):
            settings = {
                "bootstrap_servers": self.bootstrap, "input_topic": self.input, "output_topic": self.output,
                "dead_letter_topic": self.dead, "marker_topic": self.marker, "sink_id": self.sink_id,
                "transactional_id_prefix": "bench",
                "delivery_guarantee": "exactly-once" if self.name == "eos" else "at-least-once",
                "checkpoint_location": str(self.checkpoint), "trigger_interval_seconds": str(p.trigger_seconds),
                "shuffle_partitions": str(p.shuffle_partitions), "ui_port": "0", "metrics_port": "0",
                "max_offsets_per_trigger": str(p.max_per_batch),
                "filter": self.keys.filter_expression(self.key_field), "commit_shards": str(p.commit_shards),
                "publish_from": p.publish_from,
                "restart_delay_seconds": "1",
                **self._avro_settings(),
            }
            command = [*python, f"{__package__}.jobproc", "--progress-file", str(self.progress_file)]
            if self.name == "spark_kafka_job":
                command.append("--built-in-sink")
            for name, value in settings.items():
                command += ["--set", f"{name}={value}"]
            return command
        if self.name == "spark_kafka":
            return [*python, f"{__package__}.spark_kafka",
                    "--bootstrap", self.bootstrap, "--input", self.input, "--output", self.output,
                    "--checkpoint", str(self.checkpoint), "--key-field", self.key_field,
                    "--filter", self.keys.filter_expression(self.key_field), "--progress-file", str(self.progress_file),
                    "--trigger-seconds", str(p.trigger_seconds), "--max-per-trigger", str(p.max_per_batch),
                    "--shuffle-partitions", str(p.shuffle_partitions),
                    *(["--registry", p.registry, "--value-format", p.value_format] if p.value_format != "json"
                      else [])]
        if self.name == "flink":
            from . import flink_env

            # Isolated (-I): the script's directory (this package's, whose profile.py would shadow the
            # standard library's) and the project's PYTHONPATH stay off Flink's path.
            command = [str(flink_env.python()), "-I", str(Path(__file__).with_name("flink_job.py")),
                       "--bootstrap", self.bootstrap, "--input", self.input, "--output", self.output,
                       "--key-field", self.key_field, "--checkpoints", str(self.checkpoint),
                       "--transactional-id-prefix", f"bench-{self.sink_id}",
                       "--connector-jar", str(flink_env.connector_jar()),
                       "--checkpoint-ms", str(round(p.trigger_seconds * 1000)),
                       "--parallelism", str(p.shuffle_partitions)]
            return command + (["--excluded", self.keys.excluded] if self.keys.excluded else [])
        if self.name == "plain_eos":
            command = [*python, f"{__package__}.plain", "--bootstrap", self.bootstrap, "--input", self.input,
                       "--output", self.output, "--key-field", self.key_field, "--group", f"group-{self.sink_id}",
                       "--transactional-id", f"bench-{self.sink_id}", "--commit-interval-ms", str(p.plain_commit_ms),
                       "--max-per-transaction", str(p.max_per_batch)]
            return command + (["--excluded", self.keys.excluded] if self.keys.excluded else [])
        raise ValueError(f"unknown contender {self.name!r}")

    def measure(self, latency: bool = True, recovery: bool = False, backlog: bool = True, log=print
                ) -> dict[str, Any]:
        p = self.profile
        create_topics(self.bootstrap, {self.input: p.partitions, self.output: 2, self.dead: 1})
        produce_plain(self.bootstrap, self.input, p.partitions, self.stream, p.warmup)
        contender = Contender(self.name, self.command(), self.workdir)
        tail = OutputTail(self.bootstrap, self.output, self._values(self.output, {}))
        tail.start()
        contender.start()
        try:
            self._phases(contender, tail, latency, recovery, backlog, log)
        except Exception as error:  # noqa: BLE001 - one contender's failure is reported, the others still run
            self.result["error"] = f"{type(error).__name__}: {error}"
            log(f"bench: {self.name}: {self.result['error']}\n{contender.log_tail()}")
        finally:
            contender.stop()
            tail.stop()
            self.result["peak_memory_mb"] = contender.peak_memory_mb()
            self.result["profile"] = self._profile()
            self.result["workdir"] = str(self.workdir)
            delete_topics(self.bootstrap, [self.input, self.output, self.dead, self.marker])
        return self.result

    def _wait(self, tail: OutputTail, contender: Contender, what: str) -> float:
        visible = tail.wait_total(self.stream.expected_total, self.profile.timeout, alive=contender.alive)
        if visible is None:
            problem = tail.error or ("the process exited" if not contender.alive() else "timed out")
            raise RuntimeError(f"{what}: output did not reach {self.stream.expected_total} counted events "
                               f"(at {tail.total}): {problem}")
        return visible

    def _phases(self, contender: Contender, tail: OutputTail, latency: bool, recovery: bool, backlog: bool,
                log) -> None:
        p = self.profile
        self.result["startup_s"] = round(self._wait(tail, contender, "warm-up") - contender.started_at, 2)
        log(f"bench: {self.name}: up in {self.result['startup_s']}s")
        if backlog:
            log(f"bench: {self.name}: backlog of {p.events} events")
            cpu_before, records_before = contender.driver_cpu_seconds(), len(tail.snapshot())
            visible_from = produce_backlog(self.bootstrap, self.input, p.partitions, self.stream, p.events)
            done = self._wait(tail, contender, "backlog")
            cpu_after, output_records = contender.driver_cpu_seconds(), len(tail.snapshot()) - records_before
            seconds = done - visible_from
            self.result["throughput"] = {"events": p.events, "seconds": round(seconds, 3),
                                         "eps": events_per_second(p.events, seconds), "output_records": output_records,
                                         **driver_cpu(cpu_before, cpu_after, output_records)}
            log(f"bench: {self.name}: {self.result['throughput']['eps']} events/s, driver CPU "
                f"{self.result['throughput']['driver_cpu_s_per_million_records']} s per million output records")
        if latency:
            started_ms = time.time() * 1000
            base = dict(self.stream.expected)
            producer = RateProducer(self.bootstrap, self.input, p.partitions, self.stream, p.rate, p.latency_seconds)
            producer.start()
            producer.join()
            self._wait(tail, contender, "latency")
            records = [(r.visible_at, r.key, r.count) for r in tail.snapshot()]
            latencies = output_latencies(producer.produced_at, base, records)
            self.result["latency"] = {"rate_eps": p.rate, "seconds": p.latency_seconds, "events": producer.produced,
                                      "records": len(latencies), "ms": distribution(latencies, 1000),
                                      "cdf_ms": _samples(latencies), "samples_s": latencies}
            log(f"bench: {self.name}: latency p50 {self.result['latency']['ms']['p50']} ms, "
                f"p99 {self.result['latency']['ms']['p99']} ms")
            self.result["latency"]["batches"] = self._batches_since(started_ms)
        if recovery:
            self.result["recovery"] = self._recovery(contender, tail, log)
        self.result["verified"] = dict(tail.latest) == dict(self.stream.expected)

    def _recovery(self, contender: Contender, tail: OutputTail, log) -> dict[str, Any]:
        p = self.profile
        producer = RateProducer(self.bootstrap, self.input, p.partitions, self.stream, p.rate)
        producer.start()
        try:
            time.sleep(max(3.0, 3 * p.trigger_seconds))  # batches are flowing
            killed_at = contender.kill()
            contender.start()
            time.sleep(1.0)  # what the killed driver committed is visible by now; the new one has not started
            newest = tail.max_batch()
            deadline = time.monotonic() + p.timeout
            first = None
            while first is None and time.monotonic() < deadline and contender.alive():
                # A contender without batch ids (Flink): its first record the restarted process made visible.
                first = (tail.first_after(killed_at, newest) if newest >= 0
                         else tail.first_visible_after(contender.started_at))
                time.sleep(0.1)
            if first is None:
                raise RuntimeError("recovery: no new batch became visible after the restart")
            time.sleep(2.0)
        finally:
            producer.stop()
        self._wait(tail, contender, "after recovery")
        duplicates = self._duplicated_batches(tail)
        log(f"bench: {self.name}: recovered in {first.visible_at - killed_at:.1f}s")
        return {"seconds": round(first.visible_at - killed_at, 2), "first_batch_after": first.batch_id,
                "last_batch_before": newest, "duplicated_key_batches": duplicates}

    def _batches_since(self, started_ms: float) -> dict[str, Any] | None:
        """Batch times (Spark's triggerExecution) of the batches with input since `started_ms`,
        against the trigger: a job that keeps up finishes every batch within trigger + 1.5 s."""
        batches = [b for b in read_progress(self.progress_file) if _epoch_ms(b.get("timestamp")) >= started_ms]
        if not batches:
            return None
        durations = [b.get("durationMs", {}).get("triggerExecution", 0) for b in batches]
        limit_ms = self.profile.trigger_seconds * 1000 + 1500
        return {"count": len(batches), "ms": distribution(durations), "trigger_ms": self.profile.trigger_seconds * 1000,
                "over_trigger_plus_1500ms": sum(1 for d in durations if d > limit_ms)}

    @staticmethod
    def _duplicated_batches(tail: OutputTail) -> int:
        seen: set[tuple[str, int]] = set()
        duplicates = 0
        for record in tail.snapshot():
            if record.batch_id is None:
                continue
            if (record.key, record.batch_id) in seen:
                duplicates += 1
            seen.add((record.key, record.batch_id))
        return duplicates

    def _profile(self) -> dict[str, Any] | None:
        batches = read_progress(self.progress_file)
        if not batches and self.name not in ("eos", "alos"):
            return None
        profile = {"spark_progress": progress_profile(batches)}
        if self.name == "eos":
            profile["sink_log"] = sink_log_profile(self.checkpoint, self.sink_id)
            logs = sorted(self.workdir.glob("eos-*.log"))
            profile["sink_stages"] = sink_stages_profile("".join(path.read_text(errors="replace") for path in logs))
        return profile


def warm_job_start(bootstrap: str, workdir: Path, log=print, profile: Profile | None = None) -> None:
    """One untimed start and clean stop of the job, as on any host where it ran before: its
    connector's jars are known and its driver JVM's class archive is written (resolved_jars.py,
    class_archive.py). Spark's own pipeline resolves its connector at every start, as teams run it."""
    log("bench: one untimed start and stop of the job (its jar list and class archive, as after any earlier run)")
    warm = dataclasses.replace(profile or Profile(), events=0, latency_seconds=0)  # its values' format: its packages
    Run("eos", bootstrap, warm, workdir).measure(latency=False, backlog=False, log=log)
