"""The benchmark's parts that talk to Kafka, run small: a bench that breaks is found by `make
test`, not by the next person who runs `make bench` for an hour."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}_tools.bench.microbench import commit_microbench

pytestmark = pytest.mark.integration


def test_the_commit_microbenchmark_times_each_step_of_phase_2(kafka, tmp_path):
    """The microbenchmark wraps the sink's own functions by name: one renamed or moved breaks it."""
    result = commit_microbench(kafka.bootstrap_servers, rows=200, shards=2, batches=2, workdir=tmp_path)
    assert result["batches"] == 2 and result["shards"] == 2
    steps = result["steps_ms_p50"]
    assert steps["log_write"] > 0 and steps["produce"] > 0 and steps["kafka_commit"] > 0, steps
    assert result["phase2_records_per_s_p50"] > 0
