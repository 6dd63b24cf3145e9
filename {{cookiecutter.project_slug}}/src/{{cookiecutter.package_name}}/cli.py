"""Command line: `{{ cookiecutter.package_name }} <command>`; `--help` lists the commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .kafka_local import KafkaUnavailable, daemon

LOCAL_KAFKA_DIR = Path(".kafka-local")


def _kafka(args: argparse.Namespace) -> int:
    if args.action == "up":
        daemon.up(Path(args.workdir))
    else:
        print("kafka: stopped" if daemon.down(Path(args.workdir)) else "kafka: no local broker was running")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="{{ cookiecutter.package_name }}", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    kafka = commands.add_parser("kafka", help="start or stop a local single-node Kafka broker")
    kafka.add_argument("action", choices=["up", "down"])
    kafka.add_argument("--workdir", default=str(LOCAL_KAFKA_DIR), help="broker data and logs")
    kafka.set_defaults(handler=_kafka)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except KafkaUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
