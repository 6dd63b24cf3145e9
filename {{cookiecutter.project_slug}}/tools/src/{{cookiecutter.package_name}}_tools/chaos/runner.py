"""The chaos runner: starts the job again and again from its checkpoint, each run ending as the
plan says (a fault point, an external SIGKILL, or a clean stop once the input is drained), with
the planned disruptions inside the runs, then reads the output back for the verdict."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from {{ cookiecutter.package_name }}.config import DEFAULT_CONFIG_PATH, load_config

from ..job_file import query_config, query_settings
from ..kafka_io import create_topics, grow_topic
from ..processes import descendants, disposable_job_settings, start_job
from ..value_formats import input_values, output_values
from . import disruptions
from .disruptions import BROKER_LOCK, SECRET_VARIABLE, ClusterSetup
from .input import QUIET, InputProducer, end_offsets
from .plan import (
    BROKER,
    CLUSTER_FAULTS,
    GROW,
    KILL,
    OUTPUT_KILL,
    S3,
    WORKER,
    ZOMBIE,
    Profile,
    RunPlan,
    make_plan,
    room_for,
)
from .report import Reporter
from .verdict import EXCLUDED_KEY, Tally, judge_run, retried, verdict_line
from .watchers import OutputWatch, Zombie

TRANSACTIONAL_ID_PREFIX = "chaos"
# No batch for this long in a run while a chunk waits for a growth of the topic: the job ran out of
# input before the schedule grew the topic, and the chunk goes without it.
STARVED_SECONDS = 60


def _faults() -> Any:
    """sink/faults.py, imported only when used: importing the sink package imports pyspark."""
    from {{ cookiecutter.package_name }}.sink import faults

    return faults


class Chaos:
    def __init__(self, kafka: Any, profile: Profile, guarantee: str, seed: int, workdir: Path,
                 say: Reporter, cluster: ClusterSetup | None = None, registry_url: str | None = None) -> None:
        self.kafka, self.profile, self.guarantee, self.seed = kafka, profile, guarantee, seed
        self.workdir, self.say = workdir, say
        self.rng = random.Random(seed)
        self.bootstrap_servers = kafka.bootstrap_servers
        # The job file's query, on keys of the run's own (strings) and with its own filter.
        written = query_config()
        self.key_field = written.key_field
        # Avro or Protobuf values (the job file's formats): the run's own registry, and the project's output schema.
        schema = "output.proto" if written.output_format == "protobuf" else "output.avsc"
        self.avro = {"schema_registry.url": registry_url or "",
                     "output_schema": str(Path("schemas", schema).resolve())} if written.uses_registry else {}
        self.query = query_config(DEFAULT_CONFIG_PATH,
                                  schema=json.dumps({**written.schema, self.key_field: "string"}),
                                  filter=f"`{self.key_field}` != '{EXCLUDED_KEY}'", **self.avro)
        suffix = f"{seed}-{uuid.uuid4().hex[:6]}"
        self.input_topic, self.output_topic = f"chaos-events-{suffix}", f"chaos-counts-{suffix}"
        self.dead_letter_topic, self.marker_topic = f"chaos-dead-{suffix}", f"chaos-markers-{suffix}"
        self.sink_id = f"chaos-{suffix}"
        # The run's values in the job file's formats, under its own topics' subjects: the input as
        # produced and read back, the answers as read back.
        formats = load_config(None, {**query_settings(self.query), **self.avro, "input_topic": self.input_topic,
                                     "output_topic": self.output_topic}, environ={})
        self.events, self.answers = input_values(formats), output_values(formats)
        self.cluster = cluster
        self.checkpoint_location = (f"s3a://{cluster.bucket}/checkpoints/{self.sink_id}" if cluster
                                    else str(workdir / "checkpoint"))
        self.fault_log = workdir / "faults.log"
        self.tally = Tally()
        self.input_end: dict[int, int] | None = None
        self.last_reported = -1
        self.progress_at = time.monotonic()  # when a batch was last seen committed
        self.finished = False
        self.current: subprocess.Popen | None = None
        self.producer: InputProducer | None = None
        self.zombie: Zombie | None = None  # a frozen driver, woken while the next run goes on
        self.deadline = time.monotonic() + profile.deadline

    # -- settings and checkpoint ---------------------------------------------------------
    def settings(self, plan: RunPlan) -> dict[str, str]:
        topics = {"input_topic": self.input_topic, "output_topic": self.output_topic,
                  "dead_letter_topic": self.dead_letter_topic, "marker_topic": self.marker_topic}
        s3 = self.cluster.s3_settings("${" + SECRET_VARIABLE + "}") if self.cluster else {}
        return {
            **disposable_job_settings(self.bootstrap_servers, topics, self.sink_id, TRANSACTIONAL_ID_PREFIX,
                                      self.guarantee, self.checkpoint_location),
            **query_settings(self.query),
            **self.avro,
            "max_offsets_per_trigger": str(self.profile.drain_records_per_trigger if plan.end is None
                                           else self.profile.max_offsets_per_trigger),
            "restart_strategy": "fixed-delay",
            "restart_attempts": "1000",
            "commit_shards": str(self.profile.commit_shards),
            "publish_from": plan.publish_from,
            **{f"s3.{name}": value for name, value in s3.items()},
        }

    def committed(self) -> list[int]:
        from {{ cookiecutter.package_name }}.storage.checkpoint import committed_batches
        from {{ cookiecutter.package_name }}.storage.files import resolve_location

        try:
            return committed_batches(resolve_location(self.checkpoint_location))
        except OSError:  # a directory listed while Spark renames into it
            return []

    def last_committed(self) -> int:
        committed = self.committed()
        return committed[-1] if committed else -1

    def drained(self, producer: InputProducer) -> bool:
        """Every input record is in a committed batch: its end offsets are the input's end."""
        from {{ cookiecutter.package_name }}.storage.checkpoint import input_offsets
        from {{ cookiecutter.package_name }}.storage.files import resolve_location

        if not producer.done.is_set():
            return False
        if self.input_end is None:
            try:
                self.input_end = end_offsets(self.bootstrap_servers, self.input_topic)
            except Exception:  # noqa: BLE001 - the broker may be restarting: ask again later
                return False
        last = self.last_committed()
        if last < 0:
            return False
        try:
            offsets = input_offsets(resolve_location(self.checkpoint_location), last, self.input_topic)
        except (OSError, ValueError):
            return False
        if not offsets:
            return False
        return all(offsets.get(str(p), 0) >= end for p, end in self.input_end.items())

    def report_progress(self, force: bool = False) -> None:
        last = self.last_committed()
        if last != self.last_reported or force:
            self.last_reported, self.progress_at = last, time.monotonic()
            self.say(f"  batches committed so far: {last + 1} (last batch {last})")

    def fired(self) -> list[str]:
        return self.fault_log.read_text().splitlines() if self.fault_log.exists() else []

    # -- one run of the job ----------------------------------------------------------------
    def start_job(self, plan: RunPlan) -> tuple[subprocess.Popen, Path, int | None]:
        """Start a run as planned, and say so: its process, its log and the batch its fault is armed at."""
        faults = _faults()
        env: dict[str, str] = {}
        fault_batch = None
        point = plan.zombie_point if plan.end == ZOMBIE else plan.end
        if point is not None and point in faults.POINTS:
            fault_batch = self.last_committed() + plan.fault_ahead
            env[faults.POINT_VARIABLE] = point
            env[faults.BATCH_VARIABLE] = str(fault_batch)
            env[faults.LOG_VARIABLE] = str(self.fault_log)
            if plan.end == ZOMBIE:  # the zombie waits there, frozen, until the runner lets it go
                env[faults.MODE_VARIABLE] = "pause"
        self.tally.runs += 1
        log_path = self.workdir / f"run-{self.tally.runs}.log"
        launcher = None
        if self.cluster is not None:
            launcher, cluster_env = self.cluster.submission(self.checkpoint_location, sys.executable)
            env.update(cluster_env)
        process = start_job(["run"], self.settings(plan), self.workdir, log_path, env, launcher)
        self.current = process
        self.say(f"run {self.tally.runs} (pid {process.pid}): {plan.describe()}"
                 + (f" -> {faults.BATCH_VARIABLE}={fault_batch}" if fault_batch is not None else "")
                 + f"; log {log_path.name}")
        return process, log_path, fault_batch

    def disrupt(self, kind: str, process: subprocess.Popen, patient: bool) -> str | None:
        """One disruption inside a run: its victim, or None when it must be tried again later."""
        run = f"run {self.tally.runs}"
        if kind == WORKER and self.cluster is not None:
            index, killed = self.cluster.kill_spark_worker(self.rng)
            self.tally.worker_kills += 1
            self.say(f"{run}: SIGKILL of Spark worker {index} and its executor (pids {killed}); "
                     "the worker registered again 3s later")
            return f"worker {index}"
        if kind == WORKER:
            victim = disruptions.kill_python_worker(process.pid, self.rng, patient=patient)
            if victim:
                self.tally.worker_kills += 1
                self.say(f"{run}: SIGKILL of a Python worker alone: {victim}")
            elif not patient:  # e.g. exactly-once without a TTL: the whole pipeline is in the JVM
                victim = "none"
                self.say(f"{run}: no Python worker to kill: this job runs none")
            return victim
        if kind == GROW:
            count = grow_topic(self.bootstrap_servers, self.input_topic)
            if self.producer is not None:
                self.producer.grow(count)
            self.tally.input_growths += 1
            self.say(f"{run}: the input topic grown to {count} partitions; a chunk of input to all of them follows")
            return "grow"
        if kind in CLUSTER_FAULTS:
            if self.kafka.cluster is None:
                self.say(f"{run}: {kind} skipped: it needs a local three-broker cluster (--kafka-brokers 3)")
                return "skipped"
            self.say(f"{run}: broker fault {kind} ...")
            from {{ cookiecutter.package_name }}.sink import transactional_ids

            shard_0 = transactional_ids(TRANSACTIONAL_ID_PREFIX, self.sink_id) + "0"  # the coordinator's faults' target
            done = disruptions.cluster_fault(kind, self.kafka.cluster, self.rng, self.output_topic, shard_0)
            self.tally.broker_restarts += 1
            self.tally.broker_faults[kind] += 1
            self.say(f"{run}: {done}")
            return kind
        if kind == S3:
            assert self.cluster is not None
            self.say("kill -9 of the S3 server; restarting it on the same data")
            seconds = self.cluster.restart_s3()
            self.tally.s3_restarts += 1
            self.say(f"S3 server serving again after 3s down and {seconds:.1f}s to start")
            return "s3"
        assert kind == BROKER, kind
        self.say("kill -9 of the Kafka broker; restarting it on the same data")
        took = disruptions.restart_broker(self.kafka)
        if took is None:
            self.say(f"broker restart skipped: provider {self.kafka.provider} cannot restart its broker")
        else:
            self.tally.broker_restarts += 1
            self.tally.broker_faults[BROKER] += 1
            self.say(f"broker serving again after {took:.1f}s")
        return "broker"

    def kill_driver(self, process: subprocess.Popen, below: dict[int, tuple[int, int]]) -> None:
        disruptions.kill_driver(process, below)

    def stop_drained(self, process: subprocess.Popen, below: dict[int, tuple[int, int]]) -> None:
        """The input is drained: SIGTERM to the driver, which stops at a batch boundary."""
        self.say(f"run {self.tally.runs}: input drained; SIGTERM (stops at a batch boundary)")
        # The Python driver, not spark-submit's JVM: it must outlive the stop.
        os.kill(disruptions.python_driver(process, cluster=self.cluster is not None), signal.SIGTERM)
        try:
            process.wait(120)
        except subprocess.TimeoutExpired:
            self.say(f"run {self.tally.runs}: did not stop within 120s after SIGTERM: SIGKILL")
            self.kill_driver(process, below)

    def execute(self, plan: RunPlan, producer: InputProducer) -> RunPlan | None:
        """Run the job once as planned; return what remains to be done (a fault that did not
        fire, disruptions that did not happen), if anything."""
        faults = _faults()
        if plan.end == ZOMBIE:
            return self.freeze_a_zombie(plan, producer)
        before = self.last_committed()
        fired_before = len(self.fired())
        process, log_path, _ = self.start_job(plan)
        watch = RunWatch(self, plan, process, before)
        try:
            ending = watch.until_end(producer)
        finally:
            if watch.output_watch is not None:
                watch.output_watch.stop()
        # Whatever ended the run, none of its processes may survive it.
        self.kill_driver(process, watch.below)
        if self.zombie is not None:  # the run was a zombie's replacement: the zombie must have stopped
            self.judge_zombie(self.zombie)
            self.zombie = None
        fired = self.fired()[fired_before:]
        self.account(plan, process.returncode, log_path, fired, ending,
                     f"{time.monotonic() - watch.started:.1f}s, "
                     f"{max(0, self.last_committed() - before)} batches committed")
        self.report_progress(force=True)
        if plan.end in faults.POINTS and not fired:
            return RunPlan(plan.end, fault_ahead=1, disruptions=list(watch.pending), attempt=plan.attempt + 1)
        if watch.pending:
            return RunPlan(None, disruptions=list(watch.pending))
        return None

    def account(self, plan: RunPlan, code: int | None, log_path: Path, fired: list[str], ending: str | None,
                ran: str) -> None:
        """How a run ended (`ending`: "killed" or "stopped" by the runner, else None), in the tally
        and in one line."""
        job_log = log_path.read_text(errors="replace")
        restarts = job_log.count("restarting the query") + job_log.count("the query starts again from its checkpoint")
        self.tally.query_restarts += restarts
        ran += f", {restarts} in-process query restart(s)" if restarts else ""
        if fired:
            self.tally.kills += 1
            self.tally.faults += 1
            self.tally.fault_points[plan.end or "?"] += 1
            self.say(f"run {self.tally.runs}: {fired[0]} -> driver killed (exit {code}; {ran})")
        elif ending == "killed":
            self.tally.kills += 1
            self.tally.output_kills += plan.end == OUTPUT_KILL
            self.say(f"run {self.tally.runs}: driver killed (exit {code}; {ran})")
        elif ending == "stopped" and code == 0:
            self.say(f"run {self.tally.runs}: stopped cleanly ({ran})")
            self.finished = True
        else:
            self.tally.unexpected_exits += 1
            tail = " | ".join(job_log.strip().splitlines()[-3:])[-400:]
            self.say(f"run {self.tally.runs}: the job exited by itself with code {code} ({ran}): {tail}")

    # -- zombies ------------------------------------------------------------------------------
    def freeze_a_zombie(self, plan: RunPlan, producer: InputProducer) -> RunPlan | None:
        """Start the job, freeze it (SIGSTOP of its processes) at the plan's point of the commit
        protocol or a moment after its first batch, and return the replacement's run: it starts on
        the same checkpoint, wakes the zombie `plan.zombie_wake` seconds in, and is killed 15-30 s
        after that."""
        before = self.last_committed()
        fired_before = len(self.fired())
        process, log_path, fault_batch = self.start_job(plan)
        zombie = Zombie(process, log_path, plan.zombie_point, fault_batch, self.fault_log)
        started = time.monotonic()
        moment: float | None = None
        drained_at: float | None = None
        while process.poll() is None and time.monotonic() - started < self.profile.run_timeout:
            self.report_progress()
            if self.drained(producer):  # nothing left to freeze it in
                drained_at = drained_at or time.monotonic()
                if time.monotonic() - drained_at > 20:
                    self.kill_driver(process, {})
                    self.say(f"run {self.tally.runs}: the input is drained before the zombie's moment: dropped")
                    return None
            if plan.zombie_point is not None:
                paused = [found for line in self.fired()[fired_before:]
                          if (found := re.search(rf"pause at {plan.zombie_point} in batch (\d+)", line))]
                if paused:  # the batch it waits in: the first at or after the armed one
                    zombie.fault_batch = int(paused[0][1])
                    break
            elif moment is None and self.last_committed() > before:
                moment = time.monotonic() + self.rng.uniform(0, 3)
            elif moment is not None and time.monotonic() >= moment:
                break
            time.sleep(0.1)
        else:
            self.kill_driver(process, {})
            self.say(f"run {self.tally.runs}: never reached the zombie's moment (exit {process.returncode}): "
                     "tried again")
            return dataclasses.replace(plan, attempt=plan.attempt + 1)
        zombie.freeze()
        self.zombie = zombie
        self.say(f"run {self.tally.runs}: frozen (SIGSTOP of {len(zombie.frozen)} processes) "
                 f"{time.monotonic() - started:.1f}s after start; its replacement starts")
        replacement = RunPlan(KILL, kill_delay=plan.zombie_wake + self.rng.uniform(15, 30),
                              publish_from=plan.publish_from, disruptions=list(plan.disruptions))
        zombie.wake_after = plan.zombie_wake
        return replacement

    def judge_zombie(self, zombie: Zombie) -> None:
        """The woken zombie must stop by itself, in one line, with the refusal's exit status; with the
        at-least-once sink (which has no fencing) it is only reported."""
        if not zombie.woken:
            zombie.wake()
        outcome = zombie.outcome(timeout=240)
        self.tally.zombies += 1
        verdict = f"zombie (pid {zombie.process.pid}) woken: exit {outcome.code}, last line: {outcome.last_line!r}"
        if self.guarantee == "exactly-once" and not outcome.stopped_as_it_must:
            self.tally.zombie_failures.append(verdict)
            self.say(f"{verdict}: NOT the one-line stop of a zombie")
        else:
            self.say(verdict)

    # -- the whole run -----------------------------------------------------------------------
    def run(self) -> int:
        from ..sample import SAMPLE_KEYS{% if cookiecutter.query == "windowed-count" %}, event_times{% endif %}, make_events

        profile = self.profile
        keys = SAMPLE_KEYS + [f"k{i:04d}" for i in range(max(0, profile.keys - len(SAMPLE_KEYS)))]
        schema = self.query.schema

        def keep(events: list[dict]) -> list[bool]:  # the run's own filter (settings())
            return [event[self.key_field] != EXCLUDED_KEY for event in events]

{%- if cookiecutter.query == "windowed-count" %}
        sample = make_events(profile.events, self.seed, schema, self.key_field, keep, profile.malformed_rate, keys,
                             event_times(self.query), values=self.events)
{%- else %}
        sample = make_events(profile.events, self.seed, schema, self.key_field, keep, profile.malformed_rate, keys,
                             values=self.events)
{%- endif %}
        python_workers = self.guarantee == "at-least-once" or self.query.state_ttl_seconds > 0
        plans = make_plan(profile, self.rng, _faults().POINTS, cluster=self.cluster is not None,
                          python_workers=python_workers, brokers=3 if self.kafka.cluster is not None else 1)
        self.say(f"input: {profile.events} records ({sample.malformed} malformed, {len(keys)} skewed keys) "
                 f"over {profile.partitions} partitions of {self.input_topic}, in {profile.chunks} chunks "
                 f"{profile.chunk_interval:.0f}s apart while the job runs"
                 + (f" (the last {profile.input_growths} each after a growth of the topic)" if profile.input_growths
                    else "") + "; "
                 f"max_offsets_per_trigger={profile.max_offsets_per_trigger}")
        self.say("plan: " + "; ".join(f"{i + 1}) {p.describe()}" for i, p in enumerate(plans))
                 + f"; {len(plans) + 1}) clean run until drained")
        with BROKER_LOCK:
            create_topics(self.bootstrap_servers, {self.input_topic: profile.partitions, self.output_topic: 2,
                                                   self.dead_letter_topic: 1}, client=QUIET)
        abort_every = round(1 / profile.aborted_input_share) if profile.aborted_input_share else 0
        # The last chunks wait for the growths: input on the new partitions, however late they come.
        producer = InputProducer(self.bootstrap_servers, self.input_topic, sample.values, profile.partitions,
                                 profile.chunks, profile.chunk_interval, self.say, abort_every,
                                 held=profile.input_growths)
        self.producer = producer
        producer.start()  # with the first run: the input arrives while the job runs
        try:
            self.run_plans(deque(plans), producer)
        finally:
            producer.release()
        completed = self.finished
        producer.done.wait(max(1.0, self.deadline - time.monotonic()))
        if not completed:
            self.say("the deadline passed before the input was drained: verifying what was published")
        return self.verify(sample.malformed_values, completed)

    def run_plans(self, queue: deque[RunPlan], producer: InputProducer) -> None:
        """The planned runs, then clean ones until the input is drained; what a run left undone
        goes to the next one."""
        most_runs = 3 * len(queue) + 10
        while not self.finished and time.monotonic() < self.deadline and self.tally.runs < most_runs:
            plan = queue.popleft() if queue else RunPlan(None)
            if plan.end is None and not plan.disruptions:  # the plan is through: no growth to come
                producer.release()
            if plan.attempt > 3:
                self.say(f"giving up on fault {plan.end}: it did not fire in 3 runs")
                continue
            if plan.end is None and not plan.disruptions and self.drained(producer):
                self.say("the input is drained: no further run needed")
                self.finished = True
                break
            try:
                left = self.execute(plan, producer)
            except BaseException:  # interrupted: leave no job behind
                if self.current is not None:
                    self.kill_driver(self.current, {})
                if self.zombie is not None:
                    self.kill_driver(self.zombie.process, self.zombie.below)
                raise
            if left is None:
                continue
            if left.end is None and queue:  # disruptions that did not happen: the next run takes them
                queue[0].disruptions[:0] = left.disruptions
                queue[0].fault_ahead += room_for(left.disruptions)
            else:
                queue.appendleft(left)

    # -- the independent check ----------------------------------------------------------------
    def verify(self, malformed_values: list[bytes], completed: bool) -> int:
        from {{ cookiecutter.package_name }}.pipeline import query
        from {{ cookiecutter.package_name }}.storage.checkpoint import batch_ends
        from {{ cookiecutter.package_name }}.storage.files import resolve_location

        from ..readback import read_positions, read_published

        with BROKER_LOCK:
            inputs = retried(lambda: read_positions(self.bootstrap_servers, self.input_topic, timeout=300), self.say)
            published = retried(lambda: read_published(self.bootstrap_servers, self.output_topic,
                                                       self.dead_letter_topic,
                                                       as_json=self.answers.as_json), self.say)
        verdict, records = judge_run(inputs, published, malformed_values, self.key_field,
                                     batch_ends(resolve_location(self.checkpoint_location), self.input_topic),
                                     self.say, lambda events: query.model(events, self.query), query.OUTPUT,
                                     self.events)
        if records != self.profile.events:
            self.say(f"input: the topic holds {records} records, {self.profile.events} were produced")
        if self.producer is not None:
            self.tally.aborted_input = self.producer.aborted
        self.say(f"summary: {self.tally.summary()} completed={str(completed).lower()} "
                 f"duration={self.say.elapsed():.0f}s")
        for failure in self.tally.zombie_failures:
            self.say(f"  problem: {failure}")
        self.say.line(verdict_line(self.seed, self.guarantee, records, self.tally, verdict))
        if not completed:
            return 1
        if self.guarantee == "exactly-once":
            return 0 if verdict.exactly_once and not self.tally.zombie_failures else 1
        return 0


class RunWatch:
    """One run of the job, watched until it ends: the disruptions planned inside it, each after a
    batch committed in this run and a random delay, and its end (the fault fires, the runner kills
    the driver, or the input is drained and the runner stops it)."""

    def __init__(self, chaos: Chaos, plan: RunPlan, process: subprocess.Popen, before: int) -> None:
        self.chaos, self.plan, self.process, self.before = chaos, plan, process, before
        self.started = time.monotonic()
        self.pending = deque(plan.disruptions)
        self.disrupted = 0  # the k-th disruption waits for k+1 batches committed in this run
        self.due: float | None = None
        self.kill_due: float | None = (self.started + plan.kill_delay
                                       if plan.end == KILL and not plan.kill_after_batches else None)
        self.drained_at: float | None = None
        self.below: dict[int, tuple[int, int]] = {}  # the run's processes, remembered as they appear
        self.output_watch = (OutputWatch(chaos.bootstrap_servers, [chaos.output_topic, chaos.dead_letter_topic],
                                         process) if plan.end == OUTPUT_KILL else None)
        if self.output_watch is not None:
            self.output_watch.start()

    def until_end(self, producer: InputProducer) -> str | None:
        """Watch until the run ends: "killed" or "stopped" when the runner ended it, else None."""
        polls = 0
        while self.process.poll() is None:
            now = time.monotonic()
            zombie = self.chaos.zombie
            if zombie is not None and not zombie.woken and now - self.started >= zombie.wake_after:
                zombie.wake()
                self.chaos.say(f"run {self.chaos.tally.runs}: the zombie woken (SIGCONT) "
                               f"{now - self.started:.1f}s after this run's start")
            if polls % 4 == 0:
                self.below.update(descendants(self.process.pid))
            polls += 1
            self.chaos.report_progress()
            done_here = max(0, self.chaos.last_committed() - self.before)
            self.disrupt_when_due(now, done_here)
            if producer.holding and now - max(self.chaos.progress_at, self.started) > STARVED_SECONDS:
                producer.let_one_go()
                self.chaos.progress_at = now
                self.chaos.say(f"run {self.chaos.tally.runs}: no batch for {STARVED_SECONDS}s and a chunk held for "
                               "a growth of the topic: it goes now")
            ending = self.end_when_due(now, done_here, producer)
            if ending:
                return ending
            time.sleep(0.25)
        if self.output_watch is not None and self.output_watch.fired:
            self.chaos.say(f"run {self.chaos.tally.runs}: SIGKILL of the driver's process group "
                           f"{self.output_watch.fired_after:.3f}s after its first output record was visible "
                           f"({time.monotonic() - self.started:.1f}s after start)")
            return "killed"
        return None

    def disrupt_when_due(self, now: float, done_here: int) -> None:
        if self.pending and self.due is None and done_here > self.disrupted:
            self.due = now + self.pending[0][1]
        if (self.pending and self.due is not None and now >= self.due
                and self.chaos.disrupt(self.pending[0][0], self.process, patient=now < self.due + 15)):
            self.pending.popleft()
            self.disrupted += 1
            self.due = None

    def end_when_due(self, now: float, done_here: int, producer: InputProducer) -> str | None:
        chaos, plan, run = self.chaos, self.plan, f"run {self.chaos.tally.runs}"
        if plan.end == KILL and self.kill_due is None and done_here >= plan.kill_after_batches:
            self.kill_due = now + plan.kill_delay
        if plan.end == KILL and self.kill_due is not None and now >= self.kill_due:
            chaos.say(f"{run}: SIGKILL of the driver's process group "
                      f"({now - self.started:.1f}s after start, {done_here} batches in this run)")
            return self.kill()
        if chaos.drained(producer):
            self.drained_at = self.drained_at or now
            if plan.end is None:
                if self.pending:
                    chaos.say(f"{run}: input drained before {len(self.pending)} disruption(s): dropped")
                    self.pending.clear()
                chaos.stop_drained(self.process, self.below)
                return "stopped"
            waking = chaos.zombie is not None and not chaos.zombie.woken  # it must wake beside a live driver
            if now - self.drained_at > 20 and not waking:
                chaos.say(f"{run}: the input is drained and nothing fired: SIGKILL")
                return self.kill()
        if now - self.started > chaos.profile.run_timeout or now > chaos.deadline:
            chaos.say(f"{run}: no end after {now - self.started:.0f}s: SIGKILL")
            return self.kill()
        return None

    def kill(self) -> str:
        self.chaos.kill_driver(self.process, self.below)
        return "killed"


