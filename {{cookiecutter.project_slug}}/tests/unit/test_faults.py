"""The crash tests' fault points are inert unless the tools arm them: the job's own code reads no
variable, the tools' launcher (armed_job.py) arms what the variables name, and a task fires what
its driver armed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}_tools import armed_job
from {{ cookiecutter.package_name }}_tools.processes import ARMED_JOB, JOB_PACKAGE, _armed

RAISE_AT_BATCH_2 = {faults.POINT_VARIABLE: faults.BATCH_COMPUTED, faults.BATCH_VARIABLE: "2",
                    faults.MODE_VARIABLE: "raise"}


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    faults.arm({})
    yield
    faults.arm({})
    faults.in_task_of(faults.DriverFaults(0, None))


def test_the_variables_alone_fire_nothing(monkeypatch):
    for name, value in RAISE_AT_BATCH_2.items():
        monkeypatch.setenv(name, value)
    faults.maybe_crash(faults.BATCH_COMPUTED, 2)  # armed, this would raise
    assert faults.DriverFaults.of_driver().armed is None


def test_armed_a_point_fires_from_its_batch_on_and_a_task_fires_what_its_driver_armed():
    faults.arm(RAISE_AT_BATCH_2)
    faults.maybe_crash(faults.BATCH_COMPUTED, 1)
    faults.maybe_crash(faults.AFTER_LOG_ENTRY, 2)
    with pytest.raises(faults.InjectedFault, match="batch_computed in batch 2"):
        faults.maybe_crash(faults.BATCH_COMPUTED, 2)
    driver = faults.DriverFaults.of_driver()
    faults.arm({})
    faults.maybe_crash(faults.BATCH_COMPUTED, 3)
    faults.in_task_of(driver)
    with pytest.raises(faults.InjectedFault):
        faults.maybe_crash(faults.BATCH_COMPUTED, 3)


@pytest.mark.parametrize(("settings", "named"), [
    ({faults.POINT_VARIABLE: "after_everything"}, faults.POINT_VARIABLE),
    ({faults.POINT_VARIABLE: faults.BATCH_COMPUTED, faults.MODE_VARIABLE: "explode"}, faults.MODE_VARIABLE),
    ({faults.POINT_VARIABLE: faults.BATCH_COMPUTED, faults.BATCH_VARIABLE: "first"}, faults.BATCH_VARIABLE),
    ({faults.POINT_VARIABLE: faults.BATCH_COMPUTED, faults.MODE_VARIABLE: "pause"}, faults.LOG_VARIABLE),
])
def test_the_launcher_refuses_a_bad_variable_in_one_line_naming_it(settings, named, monkeypatch, capsys):
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    assert armed_job.main(["run"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and named in error and "\n" not in error, error


def test_the_tests_start_the_driver_through_the_launcher(tmp_path: Path):
    own = [sys.executable, "-m", JOB_PACKAGE, "run", "--until-idle", "3"]
    assert _armed(own, {}, tmp_path) == [sys.executable, "-m", ARMED_JOB, "run", "--until-idle", "3"]
    submitted = ["bash", "deploy/spark-submit.sh", "run"]
    environment = {"SPARK_SUBMIT_ARGS": "--conf spark.cores.max=1", "PYTHON": sys.executable}
    assert _armed(submitted, environment, tmp_path) == submitted
    driver_python = tmp_path / "armed-driver-python"
    assert environment["SPARK_SUBMIT_ARGS"] == ("--conf spark.cores.max=1 "
                                                f"--conf spark.pyspark.driver.python={driver_python}")
    assert f"-m {ARMED_JOB} " in driver_python.read_text()
    with pytest.raises(ValueError, match="fault points are armed for"):
        _armed([sys.executable, "not_deterministic.py", "run"], {}, tmp_path)
