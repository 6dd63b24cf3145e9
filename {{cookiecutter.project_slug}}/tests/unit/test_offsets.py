from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.source.offsets import OffsetsLost, check_not_lost, plan_end


def test_without_a_limit_everything_available_is_planned():
    assert plan_end({"0": 5, "1": 0}, {"0": 10, "1": 7, "2": 3}, None) == {"0": 10, "1": 7, "2": 3}


def test_a_limit_is_shared_fairly_and_never_exceeded():
    end = plan_end({"0": 0, "1": 0, "2": 0}, {"0": 1000, "1": 10, "2": 1000}, 300)
    assert sum(end.values()) == 300
    assert end["1"] == 10  # a small backlog leaves its share to the others
    assert end["0"] == 145 and end["2"] == 145


def test_a_new_partition_starts_from_its_beginning():
    assert plan_end({"0": 4}, {"0": 4, "1": 6}, 100) == {"0": 4, "1": 6}


def test_deleted_unread_records_fail_unless_the_user_accepts_the_loss():
    with pytest.raises(OffsetsLost, match=r"offsets 3\.\.9 no longer exist"):
        check_not_lost({"0": 3}, {"0": 10}, fail_on_data_loss=True)
    assert check_not_lost({"0": 3}, {"0": 10}, fail_on_data_loss=False) == {"0": 10}
