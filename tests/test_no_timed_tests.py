"""No test in either suite (the template's, the rendered project's) compares a duration measured
on the wall clock with a bound: on a loaded machine such a test fails for the machine, not for the
code. Durations belong in the bench; a test checks the bound the code applies (the line it prints,
a setting), or the order of events. A wait for a condition may give up at a generous bound: that
is a wait, not a measured duration, and it compares a clock reading with a deadline, not a
difference of readings."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import TEMPLATE

CLOCKS = {"monotonic", "time", "perf_counter", "monotonic_ns", "time_ns", "perf_counter_ns"}
# Names a test gives a measured duration (whole words: phase2_seconds_count is a metric's name).
DURATION_NAMES = {"took", "elapsed", "seconds", "duration", "waited_seconds"}


def _reads_a_clock(node: ast.AST) -> bool:
    return any(isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in CLOCKS
               and isinstance(call.func.value, ast.Name) and call.func.value.id == "time"
               for call in ast.walk(node))


def _durations_in(function: ast.AST) -> set[str]:
    """Names bound in `function` to a difference of clock readings (`took = time.monotonic() - t0`)."""
    names = set()
    for node in ast.walk(function):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Sub)
                and _reads_a_clock(node.value)):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return names


def _is_a_duration(node: ast.AST, durations: set[str]) -> bool:
    for part in ast.walk(node):
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Sub) and _reads_a_clock(part):
            return True
        if isinstance(part, ast.Name) and (part.id in durations or part.id in DURATION_NAMES):
            return True
    return False


def timed_assertions(source: str) -> list[int]:
    """The lines of `assert` statements that compare a measured duration with anything."""
    tree = ast.parse(source)
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        durations = _durations_in(function)
        for node in ast.walk(function):
            if not isinstance(node, ast.Assert):
                continue
            for compare in ast.walk(node.test):
                if (isinstance(compare, ast.Compare) and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))
                                                             for op in compare.ops)
                        and any(_is_a_duration(side, durations) for side in (compare.left, *compare.comparators))):
                    found.append(node.lineno)
                    break
    return sorted(set(found))


def test_the_check_finds_the_timed_assertions_it_is_for() -> None:
    """The check itself: each way of timing a test is found, and a wait's deadline and an order
    of timestamps are not."""
    timed = '''
def test_a():
    started = time.monotonic()
    run()
    assert time.monotonic() - started < 20
def test_b():
    started = time.monotonic()
    took = time.monotonic() - started
    assert took >= 15, took
def test_c():
    seconds = broker.start()
    assert seconds < 90
'''
    assert timed_assertions(timed) == [5, 9, 12]
    untimed = '''
def test_d():
    before = time.time()
    assert before <= stamp() <= time.time()
    deadline = time.monotonic() + 300
    while not done():
        assert time.monotonic() < deadline
    assert counter("phase2_seconds_count") >= 3
'''
    assert timed_assertions(untimed) == []


def test_no_test_in_either_suite_compares_a_wall_clock_duration_with_a_bound(rendered_default: Path) -> None:
    suites = {"the template's tests": sorted((TEMPLATE / "tests").glob("*.py")),
              "the rendered project's tests": sorted((rendered_default / "tests").rglob("*.py"))}
    offenders = [f"{path}:{line}" for paths in suites.values() for path in paths
                 for line in timed_assertions(path.read_text())]
    assert all(suites.values()), suites
    assert not offenders, ("assertions on a measured duration (a loaded machine fails them; measure in the "
                           "bench, test the bound the code applies):\n" + "\n".join(offenders))
