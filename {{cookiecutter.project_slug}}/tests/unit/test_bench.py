"""The benchmark's pure parts: percentiles, the latency definition, the result document."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from {{ cookiecutter.package_name }}_tools.bench.stats import (
    CONTENDERS,
    RESULT_SCHEMA,
    SUMMARY_FIELDS,
    contender_result,
    distribution,
    events_per_second,
    output_latencies,
    percentile,
    ratio,
    summary,
    summary_line,
    validate,
)


def test_percentile_interpolates_between_closest_ranks():
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5
    assert percentile(list(range(101)), 99) == 99.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_distribution_scales_and_rounds():
    d = distribution([0.1, 0.2, 0.3], scale=1000)
    assert d == {"count": 3, "p50": 200.0, "p90": 280.0, "p99": 298.0, "max": 300.0, "mean": 200.0}
    assert distribution([])["p50"] is None


def test_latency_is_visible_time_minus_produce_time_of_the_event_that_made_the_count_true():
    produced_at = {"red": [10.0, 11.0, 12.0], "blue": [10.5]}
    base = {"red": 100}  # red had 100 before the window; blue none
    outputs = [
        (12.5, "red", 102),  # the 2nd red event of the window (produced at 11.0) made it 102
        (12.6, "blue", 1),
        (13.0, "red", 103),
        (13.1, "red", 103),  # an at-least-once duplicate: only the first visibility counts
        (9.0, "red", 100),  # from before the window
        (14.0, "red", 104),  # more than was produced in the window: not attributable
    ]
    assert output_latencies(produced_at, base, outputs) == pytest.approx([1.5, 2.1, 1.0])


def test_latency_is_never_negative_for_a_possible_output():
    produced_at = {"k": [5.0, 6.0]}
    # count 2 cannot be visible before the 2nd event exists; visible at 6.0 is the fastest possible
    assert output_latencies(produced_at, {}, [(6.0, "k", 2)]) == [0.0]


def test_rates_and_ratios():
    assert events_per_second(1000, 4.0) == 250.0
    assert events_per_second(1000, 0) is None
    assert ratio(1.0, 4.0) == 0.25
    assert ratio(None, 4.0) is None
    assert ratio(1.0, 0) is None


def _results() -> dict:
    contenders = {}
    for i, name in enumerate(CONTENDERS):
        contender = contender_result(name)
        contender["throughput"] = {"events": 1000, "seconds": 1.0 + i, "eps": events_per_second(1000, 1.0 + i)}
        contender["latency"] = {"rate_eps": 500, "seconds": 10, "events": 5000, "records": 40,
                                "ms": distribution([0.5, 1.0], 1000)}
        contenders[name] = contender
    contenders["eos"]["recovery"] = {"seconds": 31.5}
    commit = {"runs": [{"rows": 10_000, "shards": 1, "commit_ms": {"p50": 150.25}}]}
    results = {
        "schema": RESULT_SCHEMA, "profile": {}, "environment": {}, "contenders": contenders,
        "commit_microbench": commit, "scaling": None, "duration_s": 1.0,
    }
    caught_up = {"rate_eps": 1000, "trigger_s": 2.0, "eos": {"latency": {
        "ms": distribution([2.5, 3.0], 1000),
        "batches": {"count": 10, "ms": distribution([1200, 1500, 1800]), "over_trigger_plus_1500ms": 0}}}}
    results["caught_up"] = caught_up
    results["summary"] = summary(contenders, commit, caught_up)
    results["summary_line"] = summary_line(results["summary"])
    return results


def test_result_document_shape_and_summary_line():
    results = _results()
    assert validate(results) == []
    assert json.loads(json.dumps(results)) == results  # plain JSON
    assert results["summary"] == {
        "eos_eps": 1000.0, "alos_eps": 500.0, "spark_kafka_job_eps": 333.3, "spark_kafka_eps": 250.0,
        "plain_eos_eps": 200.0, "flink_eps": 166.7, "eos_over_alos": 2.0, "eos_over_spark_kafka_job": 3.0,
        "eos_over_spark_kafka": 4.0, "eos_over_flink": 5.999, "commit_p50_ms": 150.25, "recovery_s": 31.5,
        "caught_up_latency_p50_ms": 2750.0, "caught_up_batch_p50_ms": 1500, "caught_up_batches_late": 0,
    }
    line = results["summary_line"]
    assert line == ("bench: eos_eps=1000 alos_eps=500 spark_kafka_job_eps=333.3 spark_kafka_eps=250 plain_eos_eps=200 "
                    "flink_eps=166.7 eos_over_alos=2 eos_over_spark_kafka_job=3 eos_over_spark_kafka=4 "
                    "eos_over_flink=5.999 commit_p50_ms=150.2 "
                    "recovery_s=31.5 caught_up_latency_p50_ms=2750 "
                    "caught_up_batch_p50_ms=1500 caught_up_batches_late=0")
    assert [part.split("=")[0] for part in line.removeprefix("bench: ").split()] == list(SUMMARY_FIELDS)


def test_unmeasured_figures_are_nan_and_a_broken_document_is_reported():
    assert summary_line(summary({}, None)) == "bench: " + " ".join(f"{name}=nan" for name in SUMMARY_FIELDS)
    results = _results()
    del results["contenders"]["alos"]["latency"]["ms"]["p99"]
    results["summary_line"] = "bench: something else"
    del results["duration_s"]
    problems = validate(results)
    assert "missing 'duration_s'" in problems
    assert "contender 'alos': latency needs ms.p50 and ms.p99" in problems
    assert "summary_line does not match summary" in problems


def test_the_bench_command_imports_nothing_heavy():
    code = ("import sys, {{ cookiecutter.package_name }}_tools.bench as bench, argparse; "
            "bench.add_arguments(argparse.ArgumentParser()); "
            "print(sorted(m for m in ('pyspark', 'matplotlib', 'pandas', 'confluent_kafka') if m in sys.modules))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


def test_the_stage_profile_refuses_an_unknown_variant_before_it_starts_anything():
    from {{ cookiecutter.package_name }}_tools.bench import stages

    with pytest.raises(SystemExit, match="unknown variant"):
        stages.main(["--variants", "parse,nope"])


def test_a_contenders_throughput_is_the_median_of_its_backlog_runs_and_lists_each():
    from {{ cookiecutter.package_name }}_tools.bench.measure import add_backlog_run

    first = {**contender_result("eos"), "throughput": {"events": 1000, "seconds": 2.0, "eps": 500.0}}
    add_backlog_run(first, first, round_number=1, position=1)
    add_backlog_run(first, {**contender_result("eos"), "throughput": {"events": 1000, "seconds": 1.0, "eps": 1000.0}},
                    round_number=2, position=5)
    assert first["throughput"]["eps"] == 750.0
    assert first["throughput"]["seconds"] == 1.5
    runs = [(r["round"], r["position"], r["eps"]) for r in first["throughput"]["runs"]]
    assert runs == [(1, 1, 500.0), (2, 5, 1000.0)]
    assert first["error"] is None

    add_backlog_run(first, {**contender_result("eos"), "error": "RuntimeError: backlog timed out"}, 3, 1)
    assert first["error"] == "round 3: RuntimeError: backlog timed out"
    assert len(first["throughput"]["runs"]) == 2  # a failed run adds no figure


def test_latency_rounds_pool_every_rounds_records_and_list_each_rounds_percentiles():
    """With --latency-rounds, the latency percentiles are over every round's output records (one
    30 s window moves too much from run to run), each round's p50 and p99 listed; the raw
    figures stay out of the results."""
    from {{ cookiecutter.package_name }}_tools.bench.measure import add_latency_run, drop_samples
    from {{ cookiecutter.package_name }}_tools.bench.stats import distribution

    def run(samples: list[float]) -> dict:
        return {**contender_result("eos"), "latency": {
            "rate_eps": 500.0, "seconds": 30.0, "events": 100, "records": len(samples),
            "ms": distribution(samples, 1000), "cdf_ms": [], "samples_s": samples}}

    first = run([0.1, 0.2, 0.3])
    add_latency_run(first, first, round_number=1, position=1)
    add_latency_run(first, run([0.4, 0.5, 0.6, 0.7]), round_number=2, position=2)
    latency = first["latency"]
    assert latency["ms"]["p50"] == distribution([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7], 1000)["p50"] == 400.0
    assert (latency["records"], latency["events"]) == (7, 200)
    assert [(r["round"], r["position"], r["p50"]) for r in latency["rounds"]] == [(1, 1, 200.0), (2, 2, 550.0)]
    assert "samples_s" not in drop_samples(first)["latency"]

    add_latency_run(first, {**contender_result("eos"), "latency": None}, round_number=3, position=1)
    assert len(first["latency"]["rounds"]) == 2  # a round without a latency phase adds nothing

{%- if cookiecutter.query == "windowed-count" %}

def test_a_windowed_event_stream_counts_each_event_under_its_window_key():
    """With an event time, the bench's events carry it (the time they are produced) and its
    expected counts are per key and window, as the windowed count's output records are keyed."""
    from {{ cookiecutter.package_name }}_tools.bench.workload import EventStream, EventTime, Keys

    stream = EventStream(Keys.of(8), "color", seed=1, event_time=EventTime("at", 10_000))
    first = json.loads(stream.encode("red", 1_767_225_605.5))
    stream.encode("red", 1_767_225_609.9)
    stream.encode("red", 1_767_225_610.0)
    assert first["at"] == 1_767_225_605_500
    assert dict(stream.expected) == {"red@2026-01-01T00:00:00Z": 2, "red@2026-01-01T00:00:10Z": 1}
    assert EventStream(Keys.of(8), "color", seed=1).output_key("red", 1_767_225_605.5) == "red"

{%- endif %}

def test_a_scaling_point_is_the_median_of_its_rounds_and_its_table_lists_each_round():
    """One 1,000,000-key batch varies by a fifth from run to run: --scaling-rounds runs each point
    several times, and the point is their median, compared with Spark's sink on the same query."""
    from {{ cookiecutter.package_name }}_tools.bench.benchmark_run import scaling_row
    from {{ cookiecutter.package_name }}_tools.bench.report import scaling_table

    def measured(eps: float, cpu: float) -> dict:
        return {**contender_result("eos"), "verified": True,
                "throughput": {"eps": eps, "driver_cpu_s_per_million_records": cpu},
                "profile": {"sink_stages": {"tasks": {"batches": 1, "phase1_ms_p50": eps, "phase2_ms_p50": 1.0}}}}

    failed = {**contender_result("eos"), "error": "RuntimeError: backlog timed out"}
    row = scaling_row("keys per batch", 1_000_000, "eos", [measured(30.0, 0.3), failed, measured(50.0, 0.5),
                                                           measured(40.0, 0.4)])
    assert row["eps"] == 40.0 and row["eps_rounds"] == [30.0, None, 50.0, 40.0]
    assert row["driver_cpu_s_per_million_records"] == 0.4  # the middle round's figures, not a mix
    assert row["sink_stages"]["tasks"]["phase1_ms_p50"] == 40.0
    assert row["error"] == "RuntimeError: backlog timed out"
    assert row["verified"] is False  # a round that never read its counts back is not exact
    even = scaling_row("keys per batch", 10, "eos", [measured(30.0, 0.3), measured(50.0, 0.5)])
    assert even["eps"] == 40.0 and even["driver_cpu_s_per_million_records"] == 0.3
    assert even["verified"] is True

    spark = scaling_row("keys per batch", 1_000_000, "spark_kafka_job", [measured(50.0, 0.1)])
    table = "\n".join(scaling_table({"scaling": [row, spark]}))
    line = next(line for line in table.splitlines() if line.startswith("| keys per batch | 1,000,000 | eos |"))
    assert "| 40.0 | 30 / – / 50 / 40 | 0.80 |" in line, line
    assert line.endswith("| NO | RuntimeError: backlog timed out |"), line


@pytest.mark.parametrize("size", [100, 1_000, 10_000])
def test_a_padded_event_is_about_its_record_size_and_counts_as_any_other(size: int):
    """--scaling's record size: the JSON event padded with a field no query reads, to within a few
    bytes of the size asked (its sequence number's digits vary), its key counted the same."""
    from {{ cookiecutter.package_name }}_tools.bench.workload import EventStream, Keys

    stream = EventStream(Keys.of(10), "color", seed=1, record_bytes=size)
    values = [stream.encode(key, 1_767_225_605.5) for key in stream.next_keys(20)]
    assert all(abs(len(value) - size) <= 4 for value in values), sorted({len(value) for value in values})
    assert all(set(json.loads(value)["pad"]) <= {"x"} for value in values)
    assert stream.expected_total == 20 - sum(json.loads(v)["color"] == stream.keys.excluded for v in values)


def test_each_scaling_dimension_is_plotted_with_throughput_and_memory(tmp_path):
    """One plot per dimension run, none for a dimension that was not."""
    from {{ cookiecutter.package_name }}_tools.bench.report import plots

    def point(dimension: str, value: int, contender: str) -> dict:
        return {"dimension": dimension, "value": value, "contender": contender, "eps": 1000.0 * value ** 0.5,
                "peak_memory_mb": {"driver_total": 700.0 + value / 100, "python_workers": 50.0}}

    scaling = [point(dimension, value, contender) for dimension in ("keys per batch", "record bytes")
               for value in (10, 1000) for contender in ("eos", "flink")]
    results = {"contenders": {}, "profile": {"rate": 500.0}, "scaling": scaling}
    written = plots(results, tmp_path)
    assert {"scaling-keys.png", "scaling-record-bytes.png"} <= set(written)
    assert "scaling-partitions.png" not in written
    assert all((tmp_path / name).stat().st_size > 0 for name in written)
