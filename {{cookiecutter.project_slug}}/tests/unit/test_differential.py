"""The differential oracle's comparisons (tools' differential.py), on records made here: what it
calls equal and what it catches, with the same batches and with other batch boundaries."""

from __future__ import annotations

import dataclasses
import json

from {{ cookiecutter.package_name }}_tools.differential import batches_with_input, difference
from {{ cookiecutter.package_name }}_tools.readback import DEAD_LETTER, OUTPUT, Record


def answer(batch: int, key: str, count: int) -> Record:
    return Record(batch, OUTPUT, key.encode(), json.dumps({"key": key, "count": count, "batch_id": batch}).encode())


def dead_letter(batch: int, offset: int) -> Record:
    return Record(batch, DEAD_LETTER, f"events/0/{offset}".encode(),
                  json.dumps({"reason": "not JSON", "source_offset": offset, "batch_id": batch}).encode())


REFERENCE = [answer(0, "red", 2), answer(0, "blue", 1), dead_letter(0, 3), answer(1, "red", 4)]


def test_the_same_records_in_the_same_batches_are_equal_in_any_order():
    assert difference(list(reversed(REFERENCE)), REFERENCE, "upsert", same_plan=True) is None


def test_a_batch_published_twice_is_caught_record_by_record():
    found = difference([*REFERENCE, answer(1, "red", 4)], REFERENCE, "upsert", same_plan=True)
    assert found is not None and found.startswith("1 records published that the reference run did not publish")
    assert "in batch 1: extra output record b'red'" in found


def test_a_record_missing_or_in_another_batch_is_caught_record_by_record():
    moved = [answer(0, "red", 2), answer(0, "blue", 1), dead_letter(0, 3), answer(2, "red", 4)]
    found = difference(moved, REFERENCE, "upsert", same_plan=True)
    assert found is not None and "1 records published that the reference run did not publish" in found
    assert "1 it published that are missing" in found


def test_other_boundaries_compare_the_last_answer_per_key_and_the_dead_letters():
    other = [answer(0, "blue", 1), answer(0, "red", 1), answer(1, "red", 3), dead_letter(1, 3), answer(2, "red", 4)]
    assert difference(other, REFERENCE, "upsert", same_plan=False) is None
    wrong = [answer(0, "blue", 1), answer(2, "red", 5), dead_letter(1, 3)]
    found = difference(wrong, REFERENCE, "upsert", same_plan=False)
    assert found is not None and "1 answers that the reference run does not give, 1 missing" in found


def test_other_boundaries_still_catch_a_key_twice_in_one_batch_and_a_dead_letter_twice():
    twice = [*REFERENCE, answer(1, "red", 4), dead_letter(2, 3)]
    found = difference(twice, REFERENCE, "upsert", same_plan=False)
    assert found is not None and found.startswith("2 keys published more than once where once is the rule")


def test_an_append_output_compares_the_multiset_of_records():
    appended = [answer(0, "red", 1), answer(1, "red", 1), dead_letter(0, 3)]
    assert difference(list(reversed(appended)), appended, "append", same_plan=False) is None
    found = difference(appended[:1] + appended[2:], appended, "append", same_plan=False)
    assert found is not None and "0 answers that the reference run does not give, 1 missing" in found


def test_a_record_whose_headers_differ_is_caught_with_either_plan():
    """A query that keeps its input's headers: a re-run that lost or changed them is a difference."""
    kept = dataclasses.replace(answer(0, "red", 1), headers=(("trace", b"1"), ("empty", None)))
    for lost in (dataclasses.replace(kept, headers=()), dataclasses.replace(kept, headers=(("trace", b"2"),))):
        for same_plan in (True, False):
            assert difference([lost], [kept], "append", same_plan) is not None
    assert difference([kept], [kept], "append", same_plan=False) is None


def test_batches_without_input_are_left_out_of_the_plan():
    """A run that had one more batch without input at its end (a trigger's timers) ran the same plan."""
    ends = {0: {0: 10}, 1: {0: 20}, 2: {0: 20}, 3: {0: 30}}
    assert batches_with_input(ends) == {0: {0: 10}, 1: {0: 20}, 3: {0: 30}}
    assert batches_with_input({**ends, 4: {0: 30}, 5: {0: 30}}) == batches_with_input(ends)
    assert batches_with_input({**ends, 4: {0: 31}}) != batches_with_input(ends)
