"""What the query computes, pinned: the fingerprint follows the query's model and its key field,
not its operator or its filter; a checkpoint or a savepoint of another query is refused in one line."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }} import savepoints
from {{ cookiecutter.package_name }}.config import ConfigError, JobConfig
from {{ cookiecutter.package_name }}.pipeline import fingerprint as fingerprints
from {{ cookiecutter.package_name }}.pipeline import query
from {{ cookiecutter.package_name }}.savepoints import FORMAT_VERSION, Manifest, SavepointError, pinned_query
from {{ cookiecutter.package_name }}_tools.job_file import query_config

# The query's options as job.toml sets them, as the job runs (the tools' job_file.py).
CONFIG = query_config(Path(__file__).resolve().parents[2] / "job.toml")


def summed(events: Iterable, config: JobConfig) -> Iterator[tuple[str, dict[str, object]]]:
    """A team's change: the count turned into a sum of the events' positions in the probe."""
    totals: dict[str, int] = {}
    for position, event in enumerate(events):
        key = query.as_key(event[config.key_field])
        totals[key] = totals.get(key, 0) + position
        yield key, {"key": key, "count": totals[key]}


def test_the_fingerprint_follows_what_the_query_computes(monkeypatch):
    before = fingerprints.fingerprint(CONFIG)
    assert fingerprints.fingerprint(CONFIG) == before  # no randomness, no clock
    assert fingerprints.fingerprint(dataclasses.replace(CONFIG, state_ttl_seconds=3600)) == before
    assert fingerprints.fingerprint(dataclasses.replace(CONFIG, filter="true")) == before
    schema = {**CONFIG.schema, "other_key": "string"}
    assert fingerprints.fingerprint(dataclasses.replace(CONFIG, schema=schema, key_field="other_key")) != before
    monkeypatch.setattr(query, "model", summed)
    assert fingerprints.fingerprint(CONFIG) != before


def test_a_checkpoint_records_its_query_and_refuses_another(tmp_path):
    location = str(tmp_path / "checkpoint")
    assert pinned_query.check_and_pin(location, "aaaa") is False  # a new checkpoint: recorded, nothing to say
    assert json.loads((tmp_path / "checkpoint" / pinned_query.FILE).read_text())["fingerprint"] == "aaaa"
    assert pinned_query.check_and_pin(location, "aaaa") is False
    with pytest.raises(ConfigError) as refused:
        pinned_query.check_and_pin(location, "bbbb")
    message = str(refused.value)
    assert message.startswith("configuration option 'checkpoint_location': ") and "\n" not in message
    assert "another query (fingerprint aaaa; pipeline/query.py now computes bbbb)" in message
    assert pinned_query.read_pinned(location) == "aaaa"  # the refusal changed nothing


def test_a_checkpoint_older_than_the_record_takes_the_query_it_runs_now(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text("v1\n{}\n")
    assert pinned_query.check_and_pin(str(tmp_path), "aaaa") is True  # said once, in a warning
    assert pinned_query.check_and_pin(str(tmp_path), "aaaa") is False


def manifest(query_fingerprint: str, state: str | None = None) -> Manifest:
    recorded = {name: getattr(CONFIG, name) for name in (*savepoints.MEANING, *savepoints.RECORDED)}
    recorded[savepoints.QUERY_FINGERPRINT] = query_fingerprint
    return Manifest(format_version=FORMAT_VERSION, created_at=0.0, batch_id=7, first_batch_id=0, generation=0,
                    sink_id=CONFIG.sink_id, source_offsets={CONFIG.input_topic: {"0": 10}}, published={"0": 7},
                    config=recorded, state=savepoints.declared_state(CONFIG) if state is None else state, keys=2,
                    files=[])


def test_a_savepoint_of_another_query_is_refused(monkeypatch):
    now = fingerprints.fingerprint(CONFIG)
    savepoints.check_restorable(manifest(now), CONFIG, "sp", {0: 7}, {})
    monkeypatch.setattr(query, "model", summed)
    with pytest.raises(SavepointError, match=f"sp holds the state of another query \\(fingerprint {now};"):
        savepoints.check_restorable(manifest(now), CONFIG, "sp", {0: 7}, {})


