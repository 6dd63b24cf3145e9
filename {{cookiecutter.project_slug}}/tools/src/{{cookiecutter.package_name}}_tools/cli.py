"""{{ cookiecutter.project_slug }}-tools: the job's development commands (produce-sample, demo, chaos,
bench, bench-startup, kafka up|down, registry up|down). The job's own commands are `{{ cookiecutter.package_name }} --help`."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from {{ cookiecutter.package_name }} import __version__
from {{ cookiecutter.package_name }}.cli import add_config_options, configuration, run_command
from {{ cookiecutter.package_name }}.config import ENV_PREFIX
from {{ cookiecutter.package_name }}.failures import ConfigError
from {{ cookiecutter.package_name }}.observability.logs import report_exit

from .kafka_local.unavailable import KafkaUnavailable

LOCAL_KAFKA_DIR = Path(".kafka-local")
LOCAL_REGISTRY_DIR = Path(".registry-local")


def _produce_sample(args: argparse.Namespace) -> int:
    from {{ cookiecutter.package_name }}.failures import ConfigError
    from {{ cookiecutter.package_name }}.kafka.client import cluster_topics

    from .sample import Keep, configured_sample, keep_all, produce

    config = configuration(args)
    if config.input_topic not in cluster_topics(config.bootstrap_servers, config.kafka):
        raise ConfigError("input_topic", f"topic {config.input_topic!r} does not exist on {config.bootstrap_servers}; "
                                         "`{{ cookiecutter.package_name }} topics create` creates the job's topics")
    keep: Keep = keep_all
    if args.expected:  # the configured filter decides the expected counts: Spark SQL evaluates it
        from {{ cookiecutter.package_name }}.spark.session import spark_session

        from .sample import spark_filter

        spark = spark_session("sample-expected-counts", "local[1]", shuffle_partitions=1)
        keep = spark_filter(spark, config.filter, config.schema)
    try:
        sample = configured_sample(config, keep, args.count, args.seed, args.malformed_rate)
    finally:
        if args.expected:
            spark.stop()
    produce(config.bootstrap_servers, config.input_topic, sample.values, client=config.kafka)
    if not args.expected:
        print(f"produced {args.count} events to {config.input_topic} ({sample.malformed} malformed)")
        return 0
    from {{ cookiecutter.package_name }}.pipeline import query

    from .verify import Expected, records_per_key

    expected = Expected.of(lambda events: query.model(events, config), sample.kept_events, query.OUTPUT)
    if expected.kind == "append":  # every record an answer: how many each key gets
        print(f"produced {args.count} events to {config.input_topic} ({sample.malformed} malformed); how many "
              "records the job should publish for each key:")
        shown: dict[str, object] = dict(records_per_key(expected.records))
    else:
        print(f"produced {args.count} events to {config.input_topic} ({sample.malformed} malformed); what the "
              "job should publish last for each key:")
        shown = dict(expected.answers)
    print(json.dumps(dict(sorted(shown.items())), indent=1))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo
    from .schema_registry import RegistryUnavailable

    try:
        return run_demo(Path(args.workdir), args.count, keep_kafka=args.keep_kafka)
    except RegistryUnavailable as error:  # its first line names the log that holds the rest
        report_exit(str(error).splitlines()[0])
        return 2


def _kafka(args: argparse.Namespace) -> int:
    from .kafka_local import daemon

    workdir = Path(args.workdir)
    if args.action == "up":
        try:
            workdir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigError("--workdir", f"cannot create {workdir}: {error.strerror or error}") from None
        if args.brokers != 1 and args.brokers < 3:
            raise ConfigError("--brokers", f"{args.brokers}: 1 (a broker alone) or 3 and more (a cluster)")
        try:
            with _stdout_to_stderr(args.env):
                bootstrap = daemon.up(workdir, args.brokers)
        except KafkaUnavailable as error:  # the reason's first line names the log that holds the rest
            report_exit(error.reason.splitlines()[0].rstrip(":"))
            return 2
        if args.env:  # for eval: the commands after it reach this broker, whatever job.toml says
            print(f"export KAFKA_BOOTSTRAP_SERVERS={shlex.quote(bootstrap)}")
    else:
        print("kafka: stopped" if daemon.down(Path(args.workdir)) else "kafka: no local broker was running")
    return 0


def _registry(args: argparse.Namespace) -> int:
    from . import schema_registry

    workdir = Path(args.workdir)
    if args.action == "down":
        print("schema registry: stopped" if schema_registry.down(workdir) else "schema registry: none was running")
        return 0
    try:
        with _stdout_to_stderr(args.env):
            url = schema_registry.up(workdir)
    except schema_registry.RegistryUnavailable as error:
        report_exit(str(error).splitlines()[0])
        return 2
    except OSError as error:
        raise ConfigError("--workdir", f"cannot use {workdir}: {error.strerror or error}") from None
    if args.env:  # for eval: the commands after it reach this registry, whatever job.toml's table says
        print(f"export {ENV_PREFIX}SCHEMA_REGISTRY={shlex.quote(json.dumps({'url': url}))}")
    return 0


@contextlib.contextmanager
def _stdout_to_stderr(active: bool) -> Iterator[None]:
    """Everything the start prints (its own lines, Maven's) goes to stderr, the file descriptor
    itself: stdout is left to the one line `eval` runs."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _reference(args: argparse.Namespace) -> int:
    from .reference import cli_reference, config_table

    print(config_table() if args.of == "config" else cli_reference(), end="")
    return 0


def _tool(name: str) -> Callable[[argparse.Namespace], int]:
    """`chaos` and `bench` are imported only when used."""
    return lambda args: importlib.import_module(f".{name}", __package__).run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="{{ cookiecutter.project_slug }}-tools", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(handler=handler)
        return sub

    sample = command("produce-sample", _produce_sample, "write sample events to the input topic")
    add_config_options(sample)
    sample.add_argument("--count", type=int, default=10_000, help="events to write")
    sample.add_argument("--seed", type=int, default=1, help="the same seed writes the same events")
    sample.add_argument("--malformed-rate", type=float, default=0.01, metavar="RATE",
                        help="the share of records that are not valid events (dead letters)")
    sample.add_argument("--expected", action="store_true",
                        help="also print each key's last answer the job should publish, or for an append output its "
                             "number of records (the query's model; starts a local Spark for the filter)")
    demo = command("demo", _demo, "run the job end to end on a local Kafka with sample data")
    demo.add_argument("--count", type=int, default=20_000, help="sample events to run through the job")
    demo.add_argument("--workdir", default="demo-run", help="the broker, checkpoint and logs of the run")
    demo.add_argument("--keep-kafka", action="store_true", help="leave the local broker running afterwards")
    for name, help_text in (("chaos", "kill the job, its workers and the broker at random; verify the output"),
                            ("bench", "measure throughput, latency and recovery side by side with alternatives")):
        sub = command(name, _tool(name), help_text)
        importlib.import_module(f".{name}", __package__).add_arguments(sub)
    startup = command("bench-startup", _tool("bench.startup"),
                      "where a start and a restart after SIGKILL go, next to Spark's own pipeline")
    importlib.import_module(".bench.startup", __package__).add_arguments(startup)
    reference = command("reference", _reference, "print a reference written from the code: the command line "
                        "(docs/cli.md) from the parsers, or docs/configuration.md's table from JobConfig")
    reference.add_argument("of", nargs="?", choices=("cli", "config"), default="cli",
                           help="cli: docs/cli.md; config: docs/configuration.md's table")
    kafka = command("kafka", _kafka, "start or stop a local Kafka: one broker, or a cluster of three")
    kafka.add_argument("action", choices=["up", "down"], help="start (printing the address), or stop")
    kafka.add_argument("--brokers", type=int, default=1,
                       help="1 (default), or 3: three brokers, each a KRaft controller too, topics with "
                            "3 replicas and min.insync.replicas=2")
    kafka.add_argument("--workdir", default=str(LOCAL_KAFKA_DIR), help="broker data and logs")
    kafka.add_argument("--env", action="store_true",
                       help="up: print only `export KAFKA_BOOTSTRAP_SERVERS=<address>` (for eval), the rest to stderr")
    registry = command("registry", _registry, "start or stop a local schema registry (Apicurio, Avro values)")
    registry.add_argument("action", choices=["up", "down"], help="start (printing the address), or stop")
    registry.add_argument("--workdir", default=str(LOCAL_REGISTRY_DIR), help="the registry's schemas and log")
    registry.add_argument("--env", action="store_true",
                          help=f"up: print only `export {ENV_PREFIX}SCHEMA_REGISTRY=<its table>` (for eval), the rest "
                               "to stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    # SIGTERM (a cancelled CI job, `kill`) ends a tool as Ctrl-C does: the clean-up on the way out
    # runs (chaos stops the brokers and jobs it started) instead of leaving them running.
    signal.signal(signal.SIGTERM, _terminated)
    try:
        return run_command(build_parser(), argv)
    except KeyboardInterrupt as interrupt:
        signum = interrupt.args[0] if interrupt.args else signal.SIGINT
        report_exit(f"interrupted ({signal.Signals(signum).name})")
        return 128 + signum


def _terminated(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signum)
