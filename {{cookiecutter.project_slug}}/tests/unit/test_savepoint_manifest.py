"""Savepoints without Spark or Kafka: the manifest, its checks, the refusals, the generations."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }} import savepoints
from {{ cookiecutter.package_name }}.config import JobConfig
from {{ cookiecutter.package_name }}.pipeline.fingerprint import fingerprint
from {{ cookiecutter.package_name }}.savepoints import FORMAT_VERSION, Manifest, SavepointError
from {{ cookiecutter.package_name }}_tools.job_file import query_config

# The query's options as job.toml sets them, as the job runs (the tools' job_file.py).
CONFIG = query_config(Path(__file__).resolve().parents[2] / "job.toml")


def manifest(**changes) -> Manifest:
    config = CONFIG
    base = Manifest(format_version=FORMAT_VERSION, created_at=0.0, batch_id=7, first_batch_id=0, generation=0,
                    sink_id=config.sink_id, source_offsets={config.input_topic: {"0": 10, "1": 12}},
                    published={"0": 7}, config={**{name: getattr(config, name) for name in
                                                   (*savepoints.MEANING, *savepoints.RECORDED)},
                                                savepoints.QUERY_FINGERPRINT: fingerprint(config)},
                    state=savepoints.declared_state(config), keys=2, files=[])
    return dataclasses.replace(base, **changes)


def write_savepoint(tmp_path, content: bytes = b"parquet bytes", **changes):
    (tmp_path / "state").mkdir(parents=True)
    (tmp_path / "state" / "part-0.parquet").write_bytes(content)
    import hashlib

    files = [{"path": "state/part-0.parquet", "bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}]
    (tmp_path / "manifest.json").write_bytes(manifest(files=files, **changes).to_json())
    return str(tmp_path)


def test_a_manifest_reads_back_as_written(tmp_path):
    path = write_savepoint(tmp_path)
    read = savepoints.read_manifest(path)
    assert read.batch_id == 7 and read.source_offsets == {CONFIG.input_topic: {"0": 10, "1": 12}}


def test_a_damaged_state_file_is_refused(tmp_path):
    path = write_savepoint(tmp_path)
    (tmp_path / "state" / "part-0.parquet").write_bytes(b"parquet bytez")
    with pytest.raises(SavepointError, match="changed or damaged"):
        savepoints.read_manifest(path)


def test_another_format_version_is_refused(tmp_path):
    path = write_savepoint(tmp_path, format_version=FORMAT_VERSION + 1)
    with pytest.raises(SavepointError, match=f"format version {FORMAT_VERSION + 1}"):
        savepoints.read_manifest(path)


def test_an_unfinished_savepoint_is_named_as_such(tmp_path):
    (tmp_path / "state").mkdir()
    with pytest.raises(SavepointError, match="unfinished savepoint"):
        savepoints.read_manifest(str(tmp_path))


def test_a_savepoint_of_another_key_field_or_schema_is_refused():
    config = CONFIG
    other = {**manifest().config, "key_field": "other", "schema": {"other": "string"}}
    with pytest.raises(SavepointError, match="key_field"):
        savepoints.check_restorable(manifest(config=other), config, "sp", {}, {})


def test_a_savepoint_older_than_what_its_sink_published_is_refused():
    with pytest.raises(SavepointError, match="older than the output"):
        savepoints.check_restorable(manifest(), CONFIG, "sp", markers_then={0: 9}, markers_next={})


def test_a_second_start_from_the_same_savepoint_is_refused():
    with pytest.raises(SavepointError, match="already started from"):
        savepoints.check_restorable(manifest(), CONFIG, "sp", markers_then={0: 7}, markers_next={0: 0})


def test_a_savepoint_the_sink_stopped_at_is_restorable():
    savepoints.check_restorable(manifest(), CONFIG, "sp", markers_then={0: 7}, markers_next={})


def test_generations_give_the_sink_new_ids_and_generation_zero_keeps_the_configured_one():
    assert savepoints.generation_sink_id("counts", 0) == "counts"
    assert savepoints.generation_sink_id("counts", 2) == "counts.g2"


def test_a_checkpoint_started_from_a_savepoint_runs_as_its_generation(tmp_path):
    config = JobConfig(checkpoint_location=str(tmp_path / "checkpoint"))
    assert savepoints.read_origin(config) is None
    assert savepoints.effective_config(config) == config and savepoints.first_batch_id(None) == 0
    (tmp_path / "checkpoint").mkdir()
    offsets = json.dumps({config.input_topic: {"0": 5}})
    origin = savepoints.Origin(savepoint="file:///sp", manifest_sha256="0" * 64, generation=1,
                               sink_id=f"{config.sink_id}.g1", starting_offsets=offsets, first_batch_id=8)
    (tmp_path / "checkpoint" / savepoints.ORIGIN_FILE).write_text(json.dumps(dataclasses.asdict(origin)))
    effective = savepoints.effective_config(config)
    assert effective.sink_id == f"{config.sink_id}.g1"
    assert json.loads(effective.starting_offsets) == {config.input_topic: {"0": 5}}
    assert savepoints.read_origin(config) == origin and savepoints.apply_origin(config, origin) == effective
    assert savepoints.first_batch_id(origin) == 8
    assert (savepoints.seed_location(config, origin) or "").endswith(f"/checkpoint/{savepoints.SEED_DIR}")
    assert savepoints.seed_location(config, None) is None


def test_the_savepoint_batch_is_the_last_committed_one_unless_a_later_one_was_published(tmp_path):
    location = tmp_path / "checkpoint"
    for directory, batches in (("offsets", (0, 1, 2)), ("commits", (0, 1))):
        (location / directory).mkdir(parents=True)
        for batch in batches:
            (location / directory / str(batch)).write_text("v1\n{}\n")
    config = JobConfig(checkpoint_location=str(location))
    assert savepoints.savepoint_batch(config, {0: 1}) == 1  # batch 2 planned, not published: computed again
    with pytest.raises(SavepointError, match="batch 2 was published"):
        savepoints.savepoint_batch(config, {0: 2})


def test_a_savepoint_whose_state_the_answer_keeps_otherwise_is_refused_in_one_line():
    """The manifest records the answer's state columns (pipeline/aggregates.py); a restore into a
    query whose answer keeps others would not fit them."""
    other = "`count` BIGINT, `extra_sum` DOUBLE"
    with pytest.raises(SavepointError, match=r"^configuration option 'savepoint': sp keeps each key's state as "
                                             r"\(`count` BIGINT, `extra_sum` DOUBLE\), and pipeline/query\.py's") as no:
        savepoints.check_restorable(manifest(state=other), CONFIG, "sp", {0: 7}, {})
    assert "\n" not in str(no.value)
