"""The sink settings a checkpoint was made with may change only while no batch is in doubt."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from {{ cookiecutter.package_name }}.sink.pinned_settings import FILE, PinnedSettingChanged, PinnedSettings, check_and_pin

SETTINGS = PinnedSettings(sink_id="s", marker_topic="m", transactional_id_prefix="p", commit_shards=2)


def checkpoint(tmp_path, planned: int, committed: int) -> str:
    for directory, last in (("offsets", planned), ("commits", committed)):
        (tmp_path / directory).mkdir(exist_ok=True)
        for batch in range(last + 1):
            (tmp_path / directory / str(batch)).write_text("v1\n{}\n")
    return str(tmp_path)


def test_the_first_start_records_the_settings(tmp_path):
    assert check_and_pin(checkpoint(tmp_path, -1, -1), SETTINGS) == []
    assert json.loads((tmp_path / FILE).read_text())["commit_shards"] == 2


@pytest.mark.parametrize(("option", "value"), [("commit_shards", 1), ("commit_shards", 3), ("sink_id", "t"),
                                               ("marker_topic", "n"), ("transactional_id_prefix", "q")])
def test_a_change_while_a_batch_is_in_doubt_is_refused(tmp_path, option, value):
    location = checkpoint(tmp_path, planned=2, committed=1)  # batch 2 planned, not committed: a crash
    check_and_pin(location, SETTINGS)
    with pytest.raises(PinnedSettingChanged, match=rf"batch 2 is in doubt.*run once more with {option}=") as error:
        check_and_pin(location, replace(SETTINGS, **{option: value}))
    assert error.value.option == option
    assert json.loads((tmp_path / FILE).read_text())[option] == getattr(SETTINGS, option)  # unchanged


def test_a_change_after_a_clean_stop_is_accepted_and_recorded(tmp_path):
    location = checkpoint(tmp_path, planned=2, committed=2)
    check_and_pin(location, SETTINGS)
    assert check_and_pin(location, replace(SETTINGS, commit_shards=1)) == ["commit_shards"]
    assert json.loads((tmp_path / FILE).read_text())["commit_shards"] == 1
