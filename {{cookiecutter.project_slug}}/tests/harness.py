"""Run the job as a real process, the way production runs it, so that a fault can SIGKILL it."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import pytest

from {{ cookiecutter.package_name }}.config import JobConfig, load_config
from {{ cookiecutter.package_name }}.pipeline import query
from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}.storage import checkpoint, object_store
from {{ cookiecutter.package_name }}_tools import differential
from {{ cookiecutter.package_name }}_tools.job_file import query_config, query_settings, write_job_file
from {{ cookiecutter.package_name }}_tools.kafka_io import create_topics
from {{ cookiecutter.package_name }}_tools.processes import disposable_job_settings, dump_stacks, job_command, start_job
from {{ cookiecutter.package_name }}_tools.readback import (
    SETTLE_SECONDS,
    Published,
    Record,
    batch_header_mismatches,
    read_positions,
    read_published,
    read_records,
)
from {{ cookiecutter.package_name }}_tools.routing import Model, RouteOf, routed_model
from {{ cookiecutter.package_name }}_tools.s3_local import S3Server
from {{ cookiecutter.package_name }}_tools.sample import Event, Keep, SampleInput, configured_sample, produce
from {{ cookiecutter.package_name }}_tools.value_formats import input_values, output_values
from {{ cookiecutter.package_name }}_tools.verify import Expected, Verdict, judge

# The tests' JVMs compile with C1 alone, as the job's local driver does (session.QUICK_JIT): given
# to every JVM spark-submit starts for them (the cluster suite's drivers and executors), to
# every broker (KAFKA_OPTS) and to the S3 server: they live minutes, and C2 would spend much of their CPU compiling.
# One option, no space: spark-submit.sh splits SPARK_SUBMIT_ARGS (submit_args) on spaces.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
SECRET_VARIABLE = "TEST_S3_SECRET"  # where the tests put the S3 secret for the job's `${...}` setting

# What the tests run: the query as job.toml configures it (schema, key field, filter, state TTL),
# with the defaults' other options; each test sets its own topics, checkpoint and triggers.
PROJECT = Path(__file__).resolve().parents[1]
CONFIG = query_config(PROJECT / "job.toml")
EXACTLY_ONCE = "exactly-once"  # for the tests that prove that guarantee whatever the default


def registry_options(registry_url: str, output_format: str = "avro") -> dict[str, str]:
    """A job's options for values under the registry at `registry_url`: the project's output schema
    for `output_format` (`avro` or `protobuf`) by its full path (a job runs in a working directory of its own)."""
    schema = "output.proto" if output_format == "protobuf" else "output.avsc"
    return {"schema_registry.url": registry_url, "output_schema": str(PROJECT / "schemas" / schema)}


def model(events: Iterable[Event]) -> Iterator[tuple[str, dict[str, object]]]:
    """The query's model (pipeline/query.py) as the job under test is configured."""
    return query.model(events, CONFIG)


@dataclass
class JobUnderTest:
    bootstrap_servers: str
    workdir: Path
    input_topic: str
    output_topic: str
    dead_letter_topic: str
    keep: Keep  # the configured filter, evaluated apart from the job (sample.spark_filter)
    guarantee: str = CONFIG.delivery_guarantee  # the crash tests pin the one they prove
    options: dict[str, str] = field(default_factory=dict)
    runs: int = 0
    counted_values: set[bytes] = field(default_factory=set)  # every produced event the filter keeps
    launcher: list[str] | None = None  # how the job is started; None: `python -m <package>` (local[2])
    launcher_env: dict[str, str] = field(default_factory=dict)
    # Configured by a job file written from its settings (`run --config <file>`, no `--set`), as a
    # deployment submits it; None: by `--set` flags.
    job_file: Path | None = None
    # A routing job's route, evaluated apart from it (routing.spark_route); needed when `route` is set.
    route_of: RouteOf | None = None
    # A twin's routed topics: the topic of the job it is the twin of, which qualifies their keys.
    stands_for: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.marker_topic = f"markers-{suffix}"
        self.sink_id = f"sink-{suffix}"
        self.checkpoint = self.workdir / "checkpoint"
        self.checkpoint_location = str(self.checkpoint)  # a test may put it elsewhere (s3a://...)
        self.fault_log = self.workdir / "faults.log"

    def fired_faults(self) -> list[str]:
        return self.fault_log.read_text().splitlines() if self.fault_log.exists() else []

    def settings(self) -> dict[str, str]:
        topics = {"input_topic": self.input_topic, "output_topic": self.output_topic,
                  "dead_letter_topic": self.dead_letter_topic, "marker_topic": self.marker_topic}
        return {**query_settings(CONFIG), **disposable_job_settings(
            self.bootstrap_servers, topics, self.sink_id, "test", self.guarantee, self.checkpoint_location),
            **self.options}

    def config(self) -> JobConfig:
        """The job's configuration as its runs get it, but for its S3 and Kafka client tables, whose
        secrets (`${VAR}`) only a run's own environment may hold: what the proof reads of it is the
        query and the values' formats (value_formats.py)."""
        settings = {name: value for name, value in self.settings().items()
                    if name.partition(".")[0] not in ("s3", "kafka")}
        return load_config(None, settings, environ={**os.environ, **self.launcher_env})

    def start(self, fault: str | None = None, fault_batch: int = 0, fault_mode: str = "kill", until_idle: int = 3,
              extra_env: dict[str, str] | None = None, arm_faults: bool = True, **options: str
              ) -> tuple[subprocess.Popen, Path]:
        """Start the job, to run to the end of its input (or until a fault kills it); returns the
        process and its log, kept per run. The fault points are armed through the tools' launcher
        (processes.start_job) unless not `arm_faults`: then the job starts as production starts it."""
        self.runs += 1
        env = {**self.launcher_env, **(extra_env or {})}
        if fault:
            env[faults.POINT_VARIABLE] = fault
            env[faults.BATCH_VARIABLE] = str(fault_batch)
            env.setdefault(faults.MODE_VARIABLE, fault_mode)  # a test may give it in extra_env
            env[faults.LOG_VARIABLE] = str(self.fault_log)
        log_path = self.workdir / f"run-{self.runs}.log"
        arguments, settings = ["run", "--until-idle", str(until_idle)], {**self.settings(), **options}
        if self.job_file is not None:
            arguments, settings = [*arguments, "--config", str(write_job_file(self.job_file, settings))], {}
        process = start_job(arguments, settings, self.workdir, log_path, env, self.launcher, arm_faults)
        return process, log_path

    @contextlib.contextmanager
    def running(self, until_idle: int = 3, **options: str) -> Iterator[tuple[subprocess.Popen, Path]]:
        """The job started (`start`) for the block, which waits for it; whatever of it still runs when
        the block ends (a failed wait) is SIGKILLed, its whole process group."""
        process, log_path = self.start(until_idle=until_idle, **options)
        try:
            yield process, log_path
        finally:
            if process.poll() is None:
                stop(process, signal.SIGKILL)

    def release(self, point: str, batch_id: int) -> None:
        """End the job's pause at `point` in batch `batch_id` (fault mode pause)."""
        Path(faults.release_file(str(self.fault_log), point, batch_id)).touch()

    def run(self, fault: str | None = None, fault_batch: int = 0, until_idle: int = 3, timeout: float = 400,
            extra_env: dict[str, str] | None = None, arm_faults: bool = True, **options: str
            ) -> subprocess.CompletedProcess:
        """Run the job to the end of its input (or until a fault kills it); the log is kept per run."""
        process, log_path = self.start(fault, fault_batch, until_idle=until_idle, extra_env=extra_env,
                                       arm_faults=arm_faults, **options)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise stuck(process, log_path, f"the job did not finish within {timeout}s") from None
        # Whatever happened, no process of this run may survive it (a fault kills the group).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        return subprocess.CompletedProcess(process.args, process.returncode, stdout=log_path.read_text())

    def health(self, max_batch_age: float) -> dict:
        """`status --json --check`, as an orchestrator's probe runs it."""
        command = job_command(["status", "--json", "--check", "--max-batch-age", str(max_batch_age)], self.settings())
        result = subprocess.run(command, cwd=self.workdir, capture_output=True, text=True, timeout=60)
        report = json.loads(result.stdout)
        assert (result.returncode == 0) == report["healthy"], result.stdout + result.stderr
        return report

    def routed_topics(self) -> dict[str, str]:
        """A routing job's answer topics (its `[routes]`), each with the name that qualifies its keys
        (readback.read_records); none when it does not route."""
        config = self.config()
        return {topic: self.stands_for.get(topic, topic) for topic in config.answer_topics} if config.route else {}

    def published(self, settle: float = SETTLE_SECONDS) -> Published:
        return read_published(self.bootstrap_servers, self.output_topic, self.dead_letter_topic, settle,
                              output_values(self.config()).as_json, self.routed_topics())

    def batch_header_mismatches(self) -> list[str]:
        """The committed counts and dead letters whose `batch_id` header is not their value's."""
        as_json = output_values(self.config()).as_json
        return [*(mismatch for topic in [*self.routed_topics()] or [self.output_topic]
                  for mismatch in batch_header_mismatches(self.bootstrap_servers, topic, as_json)),
                *batch_header_mismatches(self.bootstrap_servers, self.dead_letter_topic)]

    def model(self) -> Model:
        """The query's model as this job runs it: routed, each key qualified by its topic, where it routes."""
        config = self.config()
        if not config.route:
            return model
        assert self.route_of is not None, "a routing job needs route_of (the answer_routes fixture)"
        return routed_model(model, config.route, config.routes, self.route_of)

    def twin(self) -> JobUnderTest:
        """The same job on the same input, with a checkpoint, sink id, markers and output topics of
        its own (as many partitions as this job's)."""
        from confluent_kafka.admin import AdminClient

        topics = AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(timeout=30).topics
        suffix = uuid.uuid4().hex[:8]
        output, dead = f"{self.output_topic}-reference-{suffix}", f"{self.dead_letter_topic}-reference-{suffix}"
        options = dict(self.options)
        twins = {output: self.output_topic, dead: self.dead_letter_topic}
        stands_for = {}
        for name, topic in self.config().routes.items():  # a routing job's topics: each a twin of its own
            options[f"routes.{name}"] = f"{topic}-reference-{suffix}"
            twins[options[f"routes.{name}"]] = stands_for[options[f"routes.{name}"]] = topic
        create_topics(self.bootstrap_servers, {twin: len(topics[topic].partitions) for twin, topic in twins.items()})
        workdir = self.workdir / f"reference-{suffix}"
        workdir.mkdir()
        return JobUnderTest(bootstrap_servers=self.bootstrap_servers, workdir=workdir, input_topic=self.input_topic,
                            output_topic=output, dead_letter_topic=dead, keep=self.keep, guarantee=self.guarantee,
                            options=options, launcher=self.launcher, launcher_env=dict(self.launcher_env),
                            job_file=self.job_file and workdir / self.job_file.name, route_of=self.route_of,
                            stands_for=stands_for)

    def read_run(self) -> list[Record]:
        return read_records(self.bootstrap_servers, self.output_topic, self.dead_letter_topic,
                            as_json=output_values(self.config()).as_json, routed_topics=self.routed_topics())

    def compare_with_reference(self, **options: str) -> differential.Comparison:
        """The differential oracle (tools' differential.py): the twin runs the same input without a
        fault, with the options the faulted runs had, and what each published is compared."""
        reference = self.twin()
        completed = reference.run(**options)
        assert completed.returncode == 0, f"the reference run failed:\n{completed.stdout[-3000:]}"
        same_plan = (differential.batches_with_input(checkpoint.batch_ends(self.checkpoint_location, self.input_topic))
                     == differential.batches_with_input(
                         checkpoint.batch_ends(reference.checkpoint_location, self.input_topic)))
        return differential.Comparison(
            same_plan, differential.difference(self.read_run(), reference.read_run(), query.OUTPUT, same_plan))

    def verify(self, kept_events: list[Event], malformed_values: list[bytes]) -> Verdict:
        """The query's model over the events the filter keeps: the last answers and the dead
        letters (verify), then every intermediate answer batch by batch against the input read
        back with its offsets (verify_batches)."""
        events = input_values(self.config())

        def kept_event(value: bytes | None) -> Event | None:
            return events.event(value) if value is not None and value in self.counted_values else None

        run_model = self.model()
        return judge(self.published(), Expected.of(run_model, kept_events, query.OUTPUT), malformed_values,
                     read_positions(self.bootstrap_servers, self.input_topic), kept_event,
                     checkpoint.batch_ends(self.checkpoint_location, self.input_topic), run_model)


def announce(request: pytest.FixtureRequest, line: str) -> None:
    """Print `line` in the session's output, not captured with the test that asked for a fixture."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n{line}", flush=True)


class Service(Protocol):
    """What the tests start for a session: a Kafka cluster, a Spark cluster, an S3 server."""

    def start(self) -> float: ...  # the seconds it took

    def stop(self) -> None: ...


S = TypeVar("S", bound=Service)


def serving(request: pytest.FixtureRequest, service: S, unavailable: type[Exception], needed: str,
            describe: Callable[[S, float], str]) -> Iterator[S]:
    """A session fixture's body: start `service` (a failed start is tried once more: every test
    that needs it would error on that one failure), or fail the test saying that it needs
    `needed` and why none could be had (`unavailable`'s message says how to provide one);
    announce it; stop it after the session."""
    seconds = started_twice(request, service.start, unavailable, needed)
    announce(request, describe(service, seconds))
    yield service
    service.stop()


R = TypeVar("R")


def started_twice(request: pytest.FixtureRequest, start: Callable[[], R], unavailable: type[Exception],
                  needed: str) -> R:
    """`start()`, and once more if it raises `unavailable`, saying why; the test failed, saying
    that it needs `needed`, if the second start fails too."""
    try:
        return start()
    except unavailable as error:
        announce(request, f"{needed}: the first start failed, trying once more: {error}")
    try:
        return start()
    except unavailable as error:
        pytest.fail(f"{needed} and none could be started (tried twice): {error}", pytrace=False)


T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.5,
               alive: subprocess.Popen | None = None, log_path: Path | None = None) -> T:
    """Poll `condition` until it returns something true, and return that; fail saying `what` was
    not reached within `timeout`, or at once if the job process `alive` exits meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        if result := condition():
            return result
        if alive is not None and alive.poll() is not None:
            log = log_path.read_text()[-3000:] if log_path is not None else ""
            raise AssertionError(f"the job exited (status {alive.returncode}) before {what}: {log}")
        if time.monotonic() > deadline:
            if alive is not None and log_path is not None:
                raise stuck(alive, log_path, f"not {what} within {timeout:.0f}s", kill=False)
            raise AssertionError(f"not {what} within {timeout:.0f}s" + (f"; log: {log_path}" if log_path else ""))
        time.sleep(interval)


def stuck(process: subprocess.Popen, log_path: Path, what: str, kill: bool = True) -> AssertionError:
    """The failure of a job that did not get somewhere in time, with where it was: its threads'
    stacks (dump_stacks) and the end of its log; the job is killed unless the caller still owns it."""
    before = log_path.read_text(errors="replace")
    dump_stacks(process.pid)
    if kill:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    stacks = log_path.read_text(errors="replace")[len(before):]
    return AssertionError(f"{what}; log: {log_path}; its end:\n{before[-4000:]}\n"
                          f"-- the Python driver's threads (after the JVM's, in the log):\n{stacks[-8000:]}")


# What a stop in one line must not have above it: a Python traceback, a Java stack, py4j's lines.
_TRACEBACK_LINE = ("Traceback", "\tat ", "Caused by: ", '  File "')


def traceback_lines(output: str) -> list[str]:
    """The lines of a traceback or a stack trace in a job's output; in a JSON log, also the
    objects that carry one (an `exception` field: Spark's layout and the job's alike)."""
    def carries_one(line: str) -> bool:
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                return "exception" in json.loads(line) or "py4j" in line.lower()
        return line.startswith(_TRACEBACK_LINE) or "py4j" in line.lower()

    return [line for line in output.splitlines() if carries_one(line)]


def assert_stops_in_one_line(output: str, expected: str) -> None:
    """The job's own stop (fenced, refused, given up): its last line starts with `expected`, and
    no traceback or stack trace is above it (those are in the debug log, LOG_LEVEL=DEBUG)."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert lines and lines[-1].startswith(expected), lines[-20:]
    found = traceback_lines(output)
    assert not found, f"{len(found)} lines of tracebacks, e.g. {found[:5]}"


def produce_sample(job: JobUnderTest, count: int, seed: int, partitions: int, malformed_rate: float = 0.02
                   ) -> SampleInput:
    """Events of the configured schema, keys on both sides of the configured filter."""
    sample = configured_sample(job.config(), job.keep, count, seed, malformed_rate)
    produce(job.bootstrap_servers, job.input_topic, sample.values, partitions=partitions)
    job.counted_values |= sample.counted_values
    return sample


@dataclass(frozen=True)
class Crash:
    fault: str
    batch: int
    visible: bool  # the crashed batch's output was visible to read_committed right after the crash


# Points after which the crashed batch's output is visible (its Kafka transaction committed).
PUBLISHED_BEFORE_THE_CRASH = frozenset({faults.AFTER_KAFKA_COMMIT, faults.AFTER_LOG_COMMITTED,
                                        faults.WRITING_SPARK_COMMIT})
RECORDS_PER_BATCH = 1000


def crash_at_each_point(job: JobUnderTest, points: Sequence[str | tuple[str, str]], seed: int,
                        reference_run: bool = True, **options: str) -> tuple[Verdict, list[Crash]]:
    """One checkpoint through a crash at each point in turn: run 0 commits batch 0 and is killed at
    points[0] in batch 1; run k runs the batch its predecessor crashed in again (that point's
    recovery) and is killed at points[k] in the next one, batch k+1; a last run drains the input.
    One start per point plus one (not two per point, as a fresh job per point would take), and
    the verdict still checks every batch: the crashed ones and their re-runs. A point given as
    (point, place) runs that run with `publish_from = place`, and checks that phase 2 ran there.
    `reference_run`: also judge the run by a run without faults (assert_as_the_reference_run)."""
    batches = len(points) + 2
    sample = produce_sample(job, count=RECORDS_PER_BATCH * batches, seed=seed, partitions=4)
    options = {"max_offsets_per_trigger": str(RECORDS_PER_BATCH), **options}
    crashes = []
    places_seen: dict[str, set[str]] = {}  # per place asked for, where the runs' batch lines say phase 2 ran
    for k, given in enumerate(points):
        point, place = (given, None) if isinstance(given, str) else given
        batch = k + 1
        fired_before = len(job.fired_faults())
        crashed = job.run(fault=point, fault_batch=batch, **options, **({"publish_from": place} if place else {}))
        assert crashed.returncode == -signal.SIGKILL, f"{point} did not kill the job:\n{crashed.stdout[-3000:]}"
        if place:  # the batches before the crashed one say where phase 2 ran, when the runner logged them in time
            places_seen.setdefault(place, set()).update(re.findall(r", published from (\w+) \(", crashed.stdout))
        # Both sink tasks of the batch may reach the point before the SIGKILL lands: same line, twice.
        assert set(job.fired_faults()[fired_before:]) == {f"fault injection: SIGKILL at {point} in batch {batch}"}
        # Before the Kafka commit the crashed batch's transaction is left open: nothing to wait for.
        at_crash = job.published(settle=SETTLE_SECONDS if point in PUBLISHED_BEFORE_THE_CRASH else 0)
        visible = batch in at_crash.batches()
        crashes.append(Crash(point, batch, visible))
    for place, seen in places_seen.items():  # the runner reports about once a second: a batch may beat it
        assert seen <= {place}, f"publish_from = {place}: the batch lines say {sorted(seen)}"
    assert not places_seen or set().union(*places_seen.values()), "no run's batch lines said where phase 2 ran"
    drained = job.run(**options)
    assert drained.returncode == 0, drained.stdout[-3000:]
    if "publish_from" in options:  # where phase 2 ran: the batch lines say
        assert f"published from {options['publish_from']}" in drained.stdout, drained.stdout[-3000:]
    if reference_run:
        assert_as_the_reference_run(job, **options)
    return job.verify(*merged(sample)), crashes


def assert_as_the_reference_run(job: JobUnderTest, **options: str) -> None:
    """The differential oracle's verdict on a faulted run whose input was all produced before it
    started: the same batches as a run without faults, and the same records in each."""
    comparison = job.compare_with_reference(**options)
    assert comparison.same_plan, "the reference run planned other batches: the input was not all there at the start"
    assert comparison.difference is None, comparison.difference


def assert_each_malformed_kind_is_its_dead_letter(job: JobUnderTest, kinds: Sequence[bytes],
                                                 reasons: Sequence[str], output: str) -> None:
    """Each malformed value the sample wrote (`kinds`, the same bytes) is a dead letter, with one
    reason, beginning with its kind's in `reasons`; nothing else is one (the verdict counts them). A registry format's
    unknown id and other subject's id cost one rebuild of the query for the batch that met them."""
    found: dict[bytes, set[str]] = {}
    for letter in job.published().dead_letters:
        found.setdefault(base64.b64decode(letter["value_base64"]), set()).add(letter["reason"])
    for kind, value in enumerate(kinds):
        assert value in found, f"malformed kind {kind} ({value[:12]!r}) is no dead letter"
        (reason,) = found[value]
        assert reason.startswith(reasons[kind]), (kind, reason)
    assert set(found) == set(kinds)
    assert 1 <= output.count("rebuilding the query: schema id") <= 2, output[-3000:]


def merged(*samples: SampleInput) -> tuple[list[Event], list[bytes]]:
    """The samples' kept events and malformed records, in the order they were produced."""
    return ([event for sample in samples for event in sample.kept_events],
            [value for sample in samples for value in sample.malformed_values])


def expectation(*samples: SampleInput) -> tuple[Expected, list[bytes]]:
    """The output after the samples, as the query's model gives it and its kind reads it (each
    key's last answer, or every record), and the malformed records."""
    kept, malformed = merged(*samples)
    return Expected.of(model, kept, query.OUTPUT), malformed


def on_s3(job: JobUnderTest, server: S3Server, monkeypatch, **changes: str) -> dict[str, str]:
    """Point the job's checkpoint at a new bucket; the secret comes from the environment."""
    bucket = f"ckpt-{uuid.uuid4().hex[:12]}"
    server.client().create_bucket(Bucket=bucket)
    job.checkpoint_location = f"s3a://{bucket}/checkpoints/counts"
    settings = {"s3.endpoint": server.endpoint, "s3.region": server.region, "s3.access_key_id": server.access_key,
                "s3.secret_access_key": "${" + SECRET_VARIABLE + "}", "s3.path_style_access": "true", **changes}
    # This process reads the checkpoint back too (the verdict's batch ends), as the job does.
    s3 = {"endpoint": server.endpoint, "region": server.region, "access_key_id": server.access_key,
          "secret_access_key": server.secret_key}
    for name, value in object_store.environment(s3).items():
        monkeypatch.setenv(name, value)
    return settings


def stop(process: subprocess.Popen, signum: int = signal.SIGTERM) -> int:
    """End a job started with start_job by a signal to its whole process group, as systemd, a
    container runtime or a terminal's Ctrl-C sends it: SIGTERM or SIGINT (the driver stops between
    batches, the JVM ignores both), or SIGKILL. Whatever is left of the group after 120 s is
    SIGKILLed. Returns the driver's exit status."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)  # start_job makes the driver its group's leader
    try:
        process.wait(120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return process.returncode


def fetch(url: str) -> str:
    """An HTTP GET's body (the job's metrics endpoint, the Spark UI)."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def answer(url: str) -> str | None:
    """fetch, or None while nothing answers there (for wait_until)."""
    try:
        return fetch(url)
    except OSError:
        return None


def submit_args(executors: int) -> str:
    """spark-submit's options for a test's submission: the executors' JVMs compile with C1 alone
    (as the drivers do), and each worker has one core, so `executors` cores are that
    many executors. One is enough for the protocol's points in the publishing tasks; a test that
    loses a worker asks for two. Each executor is a JVM started per submission, the suite's cost."""
    return (f"--conf spark.executor.extraJavaOptions={TEST_JVM_OPTIONS} "
            f"--conf spark.cores.max={executors}")
