"""{{ cookiecutter.project_name }}: {{ cookiecutter.description }}

Commands: run, status, savepoint, state, topics, config. The development tools (produce-sample, demo,
chaos, bench, kafka up|down) are `{{ cookiecutter.project_slug }}-tools`, installed beside the job by `make venv`."""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import json
import logging
import os
import signal
from pathlib import Path

from . import __version__
from .config import DEFAULT_CONFIG_PATH, JobConfig, load_config
from .failures import ConfigError, Outcome, Source, StoppedForGood, verdict
from .masking import masked, secret_values
from .observability.logs import quiet_libraries, report_exit
from .storage import object_store

DEFAULT_CONFIG = DEFAULT_CONFIG_PATH


def add_config_options(command: argparse.ArgumentParser) -> None:
    """--config and --set, for a command that reads the job's configuration (configuration())."""
    command.add_argument("--config", metavar="FILE", help=f"job file (default: {DEFAULT_CONFIG} when present)")
    command.add_argument("--set", action="append", metavar="OPTION=VALUE", help="override one option")


def configuration(args: argparse.Namespace) -> JobConfig:
    overrides = {}
    for item in args.set or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(name, f"--set expects option=value, got {item!r}")
        overrides[name.strip()] = value
    path = Path(args.config) if args.config else (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    config = load_config(path, overrides)
    object_store.use_in_this_process(config.s3)  # the driver reads and writes S3 locations with these
    return config


def reach_storage(config: JobConfig, location: str | None = None) -> None:
    """A location on S3 (the checkpoint, unless given) answers now, or the command ends in one line
    naming the setting, before any read of it could end in a stack trace."""
    location = location or config.checkpoint_location
    if object_store.on_s3(location):
        object_store.check_bucket(location, config.s3)


def _run(args: argparse.Namespace) -> int:
    from .job import build_query, spark_session
    from .observability import logs, metrics
    from .savepoints import apply_origin, commands, read_origin
    from .spark.session import stop as stop_session
    from .startup.preflight import check_before_spark, sink_checks_meanwhile
    from .startup.startup import StartupTimes
    from .supervision.runner import StopRequested, run

    startup = StartupTimes()
    config = configuration(args)
    logs.configure(config.log_format, secret_values(config))
    check_before_spark(config)  # a wrong broker, topic or bucket fails in seconds
    restore = commands.restore_plan(config, args.from_savepoint)
    if config.metrics_port:
        metrics.serve(config.metrics_port, config.metrics_host)
    stop = StopRequested()
    stop.install()
    # The sink's checks run while the JVM starts, unless a restore is yet to write the checkpoint.
    origin = read_origin(config) if restore is None else None  # once per start, after any restore
    sink_checks = sink_checks_meanwhile(apply_origin(config, origin)) if restore is None else None
    startup.step("checks")
    spark = spark_session(config, write_class_archive=True)
    startup.step("spark session")
    try:
        if restore is not None:
            restore(spark)
            startup.step("restore")
            origin = read_origin(config)
            sink_checks = sink_checks_meanwhile(apply_origin(config, origin))
        run(spark, apply_origin(config, origin), build_query, stop, until_idle_batches=args.until_idle,
            origin=origin, startup=startup, sink_checks=sink_checks)
    finally:
        stop_session(spark)  # and, once per host, lets the JVM write its class archive
    return 0


def _status(args: argparse.Namespace) -> int:
    import json

    from .kafka.client import cluster_topics
    from .operations.status import print_status, problems, report
    from .savepoints import commands

    if args.check and args.max_batch_age is None and args.max_lag is None:
        report_exit("status --check needs a limit: --max-batch-age S, --max-lag N or both (without one, a "
                    "probe would pass whatever the job does)")
        return 2
    given = configuration(args)
    reach_storage(given)
    config = commands.effective_config(given)
    if not args.check:  # a probe reports an unreachable Kafka as a problem; the command fails in one line
        cluster_topics(config.bootstrap_servers, config.kafka)
    status = report(config)
    found = problems(status, args.max_batch_age, args.max_lag) if args.check else []
    if args.json:
        print(json.dumps({**status, "healthy": not found, "problems": found} if args.check else status, indent=1))
    else:
        print_status(status)
        for problem in found:
            print(f"unhealthy: {problem}")
    return 1 if found else 0


def _savepoint(args: argparse.Namespace) -> int:
    from .job import spark_session
    from .savepoints import commands

    if args.action == "create":
        if not args.to:
            raise ConfigError("--to", "savepoint create needs --to PATH (a new local path or s3:// location)")
        config = configuration(args)
        commands.require_answer(config, "savepoint create")  # the configuration alone decides: before any storage
        reach_storage(config)
        reach_storage(config, args.to)
        return commands.create(config, args.to, args.timeout, spark_session)
    if not args.path:
        raise ConfigError("path", "savepoint inspect needs the savepoint's PATH")
    config = configuration(args)
    reach_storage(config, args.path)
    return commands.inspect(config, args.path, args.json, args.limit)


def _state(args: argparse.Namespace) -> int:
    from .job import spark_session
    from .savepoints import commands

    config = configuration(args)
    commands.require_answer(config, "state")  # the configuration alone decides: before any storage
    reach_storage(config)
    return commands.show_state(config, args.json, args.limit, spark_session)


def _topics(args: argparse.Namespace) -> int:
    from .kafka.topics import create_topics

    config = configuration(args)
    for line in create_topics(config, args.partitions):
        print(line)
    return 0


def _avro_schema(args: argparse.Namespace) -> int:
    import dataclasses

    from .job import answer_avro_schema, spark_session
    from .spark.session import stop as stop_session

    config = configuration(args)
    spark = spark_session(dataclasses.replace(config, ui_port=0), app_name="{{ cookiecutter.project_slug }}-avro-schema")
    try:
        print(json.dumps(answer_avro_schema(spark, config), indent=1))
    finally:
        stop_session(spark)
    return 0


def _protobuf_schema(args: argparse.Namespace) -> int:
    import dataclasses

    from .job import answer_protobuf_schema, spark_session
    from .spark.session import stop as stop_session

    config = configuration(args)
    spark = spark_session(dataclasses.replace(config, ui_port=0), app_name="{{ cookiecutter.project_slug }}-protobuf-schema")
    try:
        print(answer_protobuf_schema(spark, config), end="")
    finally:
        stop_session(spark)
    return 0


def _show_config(args: argparse.Namespace) -> int:
    print(json.dumps(masked(configuration(args)), indent=1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="{{ cookiecutter.package_name }}", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler, help: str, configured: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        if configured:
            add_config_options(sub)
        sub.set_defaults(handler=handler)
        return sub

    run = command("run", _run, "start or resume the job from its checkpoint; SIGTERM stops it between batches")
    run.add_argument("--until-idle", type=int, metavar="N",
                     help="stop after N idle triggers in a row once input was processed (demos, tests)")
    run.add_argument("--from-savepoint", metavar="PATH",
                     help="start a new checkpoint (an empty checkpoint_location) from a savepoint")
    status = command("status", _status, "last committed batches, their offsets, sink log and lag")
    status.add_argument("--json", action="store_true", help="print it as one JSON object")
    status.add_argument("--check", action="store_true",
                        help="exit 1 when the job is stuck or falling behind (needs one of the limits below)")
    status.add_argument("--max-batch-age", type=float, metavar="S",
                        help="stuck: input waits and no batch was committed for S seconds")
    status.add_argument("--max-lag", type=int, metavar="N", help="falling behind: more than N input records wait")
    savepoint = command("savepoint", _savepoint,
                        "create: stop the job at a batch boundary (if it runs) and save its state and positions; "
                        "inspect: show a savepoint")
    savepoint.add_argument("action", choices=["create", "inspect"], help="take a savepoint, or show one")
    savepoint.add_argument("path", nargs="?", help="inspect: the savepoint")
    savepoint.add_argument("--to", metavar="PATH", help="create: a new local path or s3:// location")
    savepoint.add_argument("--timeout", type=float, default=600.0, metavar="S",
                           help="create: how long to wait for a running job to stop (default 600 s)")
    savepoint.add_argument("--json", action="store_true", help="inspect: print it as one JSON object")
    savepoint.add_argument("--limit", type=int, default=20, help="inspect: the keys shown, in key order")
    state = command("state", _state, "the job's state (running or stopped): keys, answers, offsets, last published")
    state.add_argument("--json", action="store_true", help="print it as one JSON object")
    state.add_argument("--limit", type=int, default=20, help="the keys shown, in key order (default 20)")
    topics = command("topics", _topics, "create the job's input, output and dead-letter topics if missing")
    topics.add_argument("action", choices=["create"], help="create the topics that are missing")
    topics.add_argument("--partitions", type=int, default=4, help="partitions of each topic created")
    command("avro-schema", _avro_schema, "print the Avro schema the query's answers are published with "
                                         "(output_format avro: output_schema must be it)")
    command("protobuf-schema", _protobuf_schema, "print the .proto file the query's answers are published with "
                                                 "(output_format protobuf: output_schema must fit it)")
    command("config", _show_config, "print the effective configuration")
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), argv)


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Run the parsed command; the errors a user can fix end it in one line with exit status 2,
    the restart strategy's verdict with 1. The job's CLI and its tools' share it."""
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(message)s")
    quiet_libraries()  # py4j's traceback of a failed batch at DEBUG: the job says it in one line
    # A driver that seems stuck: `kill -USR1 <pid>` prints every Python thread's stack to stderr
    # and the job goes on (`kill -QUIT` on its JVM does the same for Java's threads). Not where
    # stderr is no file (a caller capturing it): there is nowhere to print them then.
    with contextlib.suppress(io.UnsupportedOperation, ValueError):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as error:
        report_exit(str(error))
        return 2
    except StoppedForGood as error:  # the restart strategy's verdict; each failure was logged above
        report_exit(str(error))
        return 1
    except Exception as error:
        # One of the job's failures met outside the runner (a start-up check, a command), or
        # Kafka's answer to a command (an outage, a refusal): one line, the exit status from its outcome.
        judged = verdict(error)
        if judged.source not in (Source.JOB, Source.KAFKA):
            raise  # a defect: its traceback is what a report needs
        if judged.outcome is Outcome.FIX_SETTING:
            report_exit(str(ConfigError(judged.option or "kafka", judged.message)))
            return 2
        report_exit(judged.line if judged.source is Source.KAFKA else f"stopping: {judged.line}")
        return 1
