"""The job's log, for people (`log_format = "text"`) or for machines (`"json"`: one JSON object
per line, in the fields of Spark's own structured logging, `ts`, `level`, `logger`, `msg`, plus
the event's own fields). Events: `batch` (one per batch: id, input rows, output records, dead
letters, durations per phase, lag), `failure`, `restart`, `kafka_unreachable`. The values of the
secret client settings ([kafka], [s3], [spark]: passwords, JAAS lines, keys) never appear: they
are replaced by *** in every line, whatever logged them."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(message)s"
EVENT = "event"  # the `extra` key of a record that carries an event's fields


def event(kind: str, **fields: Any) -> dict[str, dict[str, Any]]:
    """`extra=` for a logging call: log.info("...", extra=event("batch", batch_id=3))."""
    return {EVENT: {"event": kind, **fields}}


class _Redacting(logging.Formatter):
    def __init__(self, secrets: Iterable[str], fmt: str | None = None) -> None:
        super().__init__(fmt)
        # Longest first, so that a secret containing another is masked whole.
        self.secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


class TextFormatter(_Redacting):
    def format(self, record: logging.LogRecord) -> str:
        return self.redact(super().format(record))


class JsonFormatter(_Redacting):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **getattr(record, EVENT, {}),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return self.redact(json.dumps(entry, default=str))


# py4j logs an exception raised in a Python function the JVM calls (the sink's foreachBatch
# function) at ERROR, with its traceback, before handing it back to the JVM: the query ends with
# it and the runner says so in one line (a restart's "query failed: ...", or the stop's `error:
# ...`); Spark's own line for it is at DEBUG too (conf/log4j2.properties).
PY4J_CALLBACK_LOGGERS = ("py4j.clientserver", "py4j.java_gateway")
PY4J_CALLBACK_ERROR = "There was an exception while executing the Python Proxy"


class CallbackErrorsAtDebug(logging.Filter):
    """py4j's record of a callback's exception, at DEBUG: with its traceback when the job's log
    level is DEBUG (LOG_LEVEL=DEBUG), else dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith(PY4J_CALLBACK_ERROR):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def quiet_libraries() -> None:
    """py4j at WARNING, and its callbacks' exceptions at DEBUG (CallbackErrorsAtDebug); the schema
    registry client's HTTP library at WARNING (a line per request, each with its URL)."""
    logging.getLogger("py4j").setLevel(logging.WARNING)
    for name in ("httpx", "httpx2", "httpcore"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in PY4J_CALLBACK_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, CallbackErrorsAtDebug) for f in logger.filters):
            logger.addFilter(CallbackErrorsAtDebug())


def configure(log_format: str, secrets: Iterable[str]) -> None:
    """Switch the process's log handlers to the configured format (the CLI starts with text);
    `secrets`: the values masked in every line (masking.secret_values)."""
    secrets = list(secrets)
    formatter = JsonFormatter(secrets) if log_format == "json" else TextFormatter(secrets, TEXT_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)


def report_exit(message: str) -> None:
    """The CLI's last word before a non-zero exit: an `exit` event in a JSON log, else `error: ...`
    on stderr."""
    if any(isinstance(handler.formatter, JsonFormatter) for handler in logging.getLogger().handlers):
        logging.getLogger(__name__).error(message, extra=event("exit"))
    else:
        print(f"error: {message}", file=sys.stderr)
