"""The windowed count's late events, on a real broker. The query's model knows no watermark (late
events depend on where the batches begin and end): here the batches are placed on purpose, and the
expectation follows from the definition, apart from the job: the watermark of a batch is the latest
event time of the batches before it less `allowed_lateness_seconds`; an event whose window ends at
or before it is a dead letter (reason `late: ...`) and changes no count."""

from __future__ import annotations

import base64
import json
from collections import Counter

import pytest

from {{ cookiecutter.package_name }}.pipeline.windowed_counting import iso_time, window_key, window_start
from {{ cookiecutter.package_name }}.storage.checkpoint import planned_batches
from {{ cookiecutter.package_name }}.storage.files import filesystem, read_bytes
from {{ cookiecutter.package_name }}_tools.sample import EVENT_TIME_BASE_MS, produce

from harness import CONFIG

pytestmark = pytest.mark.integration

WINDOW_MS = CONFIG.window_seconds * 1000
LATENESS_MS = CONFIG.allowed_lateness_seconds * 1000
T0 = window_start(EVENT_TIME_BASE_MS, WINDOW_MS)


def event(key: str, at_ms: int) -> bytes:
    return json.dumps({CONFIG.key_field: key, CONFIG.event_time_field: at_ms}).encode()


def batch_watermark(location: str, batch_id: int) -> int:
    """Spark's watermark for a batch, as `offsets/N` records it (its second line's metadata)."""
    fs, base = filesystem(location)
    return int(json.loads(read_bytes(fs, f"{base}/offsets/{batch_id}").decode().splitlines()[1])["batchWatermarkMs"])


def test_an_event_behind_the_watermark_is_a_dead_letter_and_changes_no_window(job):
    # Run 1, one batch (no event late): the latest event time is two windows past lateness, so
    # the watermark of every later batch is T0 + 2 windows.
    latest = T0 + LATENESS_MS + 2 * WINDOW_MS
    first = [event("red", T0 + WINDOW_MS // 2), event("red", T0 + 3 * WINDOW_MS // 2), event("blue", latest)]
    produce(job.bootstrap_servers, job.input_topic, first, partitions=1)
    result = job.run(filter="true")
    assert result.returncode == 0, result.stdout
    watermark = batch_watermark(job.checkpoint_location, planned_batches(job.checkpoint_location)[-1])
    assert watermark == latest - LATENESS_MS, "no batch without input ran after the first: the watermark did not move"

    # Run 2: two events whose windows ended (one of them exactly at the watermark), two on time.
    late = [event("red", T0 + WINDOW_MS // 2), event("red", T0 + 3 * WINDOW_MS // 2)]
    on_time = [event("blue", T0 + 5 * WINDOW_MS // 2), event("red", latest)]
    produce(job.bootstrap_servers, job.input_topic, late + on_time, partitions=1)
    result = job.run(filter="true")
    assert result.returncode == 0, result.stdout

    published = job.published()
    counts: Counter[tuple[str, int]] = Counter()
    for value in first + on_time:
        fields = json.loads(value)
        counts[fields[CONFIG.key_field], window_start(fields[CONFIG.event_time_field], WINDOW_MS)] += 1
    expected = {window_key(key, start): {"key": window_key(key, start), "window_start": iso_time(start),
                                         "window_end": iso_time(start + WINDOW_MS), "count": count}
                for (key, start), count in counts.items()}
    assert published.final_answers() == expected
    dead = sorted(published.dead_letters, key=lambda letter: letter["source_offset"])
    assert [base64.b64decode(letter["value_base64"]) for letter in dead] == late
    assert [letter["source_offset"] for letter in dead] == [3, 4]
    assert all(letter["reason"].startswith("late: its window ended at ") for letter in dead), dead
    assert f"the watermark was {iso_time(watermark)}" in dead[1]["reason"]
