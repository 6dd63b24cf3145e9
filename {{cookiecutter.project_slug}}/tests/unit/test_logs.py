"""The log formats (logs.py): JSON lines with the event's fields, secrets masked in both formats,
and the batch event built from Spark's progress and what the sink published for that batch."""

from __future__ import annotations

import json
import logging

from {{ cookiecutter.package_name }}.config import load_config
from {{ cookiecutter.package_name }}.masking import secret_values
from {{ cookiecutter.package_name }}.observability.logs import JsonFormatter, TextFormatter, event, quiet_libraries
from {{ cookiecutter.package_name }}.sink.coordinator import BatchPublished
from {{ cookiecutter.package_name }}.sink.sink_log import COMMITTED, LogEntry
from {{ cookiecutter.package_name }}.supervision.runner import batch_event, lag_per_partition


def record(message: str, extra: dict | None = None) -> logging.LogRecord:
    entry = logging.LogRecord("job", logging.WARNING, __file__, 1, message, None, None)
    entry.__dict__.update(extra or {})
    return entry


def test_a_json_line_holds_the_event_and_no_secret():
    config = load_config(None, {"kafka.sasl.password": "${PW}", "kafka.client.id": "visible-client"},
                         environ={"PW": "s3cr3t-pw"})
    secrets = secret_values(config)
    assert secrets == ["s3cr3t-pw"]
    line = JsonFormatter(secrets).format(record("login with s3cr3t-pw as visible-client",
                                                event("failure", error="auth s3cr3t-pw refused")))
    entry = json.loads(line)
    assert entry["event"] == "failure" and entry["level"] == "WARNING" and entry["logger"] == "job"
    assert entry["msg"] == "login with *** as visible-client" and entry["error"] == "auth *** refused"
    assert entry["ts"].endswith("Z")
    assert "s3cr3t" not in TextFormatter(secrets, "%(message)s").format(record("pw s3cr3t-pw"))


def test_py4js_traceback_of_a_failed_batch_is_a_debug_line(caplog):
    """py4j logs the exception of a Python function the JVM called (the sink's foreachBatch) at
    ERROR with its traceback; the job says it in one line, so it is a DEBUG line, shown only at
    LOG_LEVEL=DEBUG. py4j's other warnings stay as they are."""
    quiet_libraries()
    py4j = logging.getLogger("py4j.clientserver")

    def a_batch_fails() -> None:
        try:
            raise RuntimeError("batch 3 failed")
        except RuntimeError:
            py4j.exception("There was an exception while executing the Python Proxy on the Python Side.")
        py4j.warning("something else")

    caplog.set_level(logging.INFO)
    a_batch_fails()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("WARNING", "something else")]
    caplog.clear()
    caplog.set_level(logging.DEBUG)
    a_batch_fails()
    debug, warning = caplog.records
    assert debug.levelname == "DEBUG" and debug.levelno == logging.DEBUG and warning.levelname == "WARNING"
    assert "RuntimeError: batch 3 failed" in TextFormatter([], "%(levelname)s %(message)s").format(debug)


def test_every_password_a_tls_or_sasl_client_takes_is_a_secret():
    """librdkafka's and the Java client's names for the SCRAM password, key and store passwords,
    JAAS lines: masked in the logs and `config` (masking.is_secret)."""
    names = ("sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
             "sasl.jaas.config", "sasl.oauthbearer.client.secret")
    passwords = {name: f"pw-{n}-value" for n, name in enumerate(names)}
    config = load_config(None, {**{f"kafka.{name}": "${" + f"V{n}" + "}" for n, name in enumerate(names)},
                                "kafka.ssl.keystore.location": "/etc/kafka/client.p12"},
                         environ={f"V{n}": passwords[name] for n, name in enumerate(names)})
    assert sorted(secret_values(config)) == sorted(passwords.values())
    shown = JsonFormatter(secret_values(config)).format(record(" ".join(passwords.values())))
    assert not any(password in shown for password in passwords.values()), shown


def test_the_batch_event_has_the_sinks_figures_for_that_batch():
    config = load_config(None, {"sink_id": "logs-unit"}, environ={})
    progress = {"batchId": 7, "numInputRows": 500, "durationMs": {"addBatch": 120, "triggerExecution": 180},
                "sources": [{"latestOffset": {"events": {"0": 40, "1": 10}},
                             "endOffset": {"events": {"0": 30, "1": 10}}}]}
    entry = LogEntry(batch_id=7, status=COMMITTED, transactional_ids=["t-0"], records_per_shard=[7])
    published = BatchPublished(entry, {config.output_topic: 5, config.dead_letter_topic: 2}, 0.0123,
                          published_from="tasks", phase1_seconds=0.2)
    fields = batch_event(progress, lag_per_partition(progress), config, published)["event"]
    assert fields == {"event": "batch", "batch_id": 7, "input_rows": 500,
                      "duration_ms": {"addBatch": 120, "triggerExecution": 180}, "lag": 10,
                      "lag_per_partition": {"events/0": 10, "events/1": 0},
                      "output_records": 5, "dead_letters": 2, "phase1_ms": 200.0, "phase2_ms": 12.3,
                      "published_from": "tasks"}
    # A batch the sink did not publish here (at-least-once, or not yet): no figures rather than another's.
    assert "output_records" not in batch_event(progress, lag_per_partition(progress), config, None)["event"]
