"""docs/troubleshooting.md's table is held to the code. Every line the job can stop with (and
every `query failed` line a restart follows) is made here by the code that prints it: the CLI's
run_command, the runner's endings, the restart strategy, the start-up checks, the heartbeat, each
given "..." for a message. Each failure has a row that shows one of its lines, found by the part
the code fixes (up to the first message or number), with the exit status the line ends with; each
row shows text the code prints. A renamed class, a changed prefix or a new failure without a row
fails here, and so does a row whose text no code prints any more."""

from __future__ import annotations

import argparse
import ast
import contextlib
import inspect
import io
import json
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, get_args

import pytest
from confluent_kafka import KafkaError, KafkaException

import {{ cookiecutter.package_name }}
from {{ cookiecutter.package_name }} import cli, failures
from {{ cookiecutter.package_name }}.config import RestartStrategyKind
from {{ cookiecutter.package_name }}.failures import ConfigError, FailureVerdict, JobFailure, Outcome, StoppedForGood, verdict
from {{ cookiecutter.package_name }}.startup import preflight
from {{ cookiecutter.package_name }}.storage.driver_presence import HEARTBEAT
from {{ cookiecutter.package_name }}.supervision import runner
from {{ cookiecutter.package_name }}.supervision.heartbeat import Heartbeat

from test_failures import exception_classes

TROUBLESHOOTING = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"
PACKAGE = Path({{ cookiecutter.package_name }}.__file__).parent
HEADER = "\n| the line starts with | what it means | what to do |\n| --- | --- | --- |\n"
MESSAGE = "..."  # a message, in the rows and in the lines made here
OPTION = "<name>"  # an option an instance names (ConfigError's): the rows' generic one
VARIABLE = re.compile(r"\.\.\.|\d")  # where the part of a line the code fixes ends
# What a row writes for a message or a number: the rest of its text is the code's, word for word.
PLACEHOLDER = re.compile(r"\.\.\.|<[^>]+>|\b(?:N|Ns|S|Ss|T|X|Y|A)\b|\d+")


@dataclass(frozen=True)
class Line:
    text: str  # as printed, "..." for each message
    exit: int | None  # the command's exit status; None: a log line, the job goes on (or restarts)

    @property
    def prefix(self) -> str:
        found = VARIABLE.search(self.text)
        return self.text[:found.start()] if found else self.text


@dataclass(frozen=True)
class Row:
    text: str  # the first column's backticked text
    exit: int | None  # its "(exit N)", if any


def rows() -> list[Row]:
    body = TROUBLESHOOTING.read_text().split(HEADER, 1)[1].split("\n\n", 1)[0]
    parsed = []
    for row in body.splitlines():
        first = row.strip().strip("|").split(" | ", 1)[0]
        shown = re.findall(r"`([^`]+)`", first)
        assert len(shown) == 1, f"a row shows one line, in backticks: {row}"
        assert not shown[0].startswith(MESSAGE), f"a row starts with text the code fixes: {row}"
        status = re.search(r"\(exit (\d)\)", first)
        parsed.append(Row(shown[0], int(status.group(1)) if status else None))
    return parsed


def shows(row: Row, line: Line) -> bool:
    """Whether `line` can be one that `row` shows: the same exit status, and a text that starts with
    the line's fixed part, each "..." of the row standing for any text."""
    return row.exit == line.exit and _starts_alike(row.text.split(MESSAGE), line.prefix)


def _starts_alike(parts: list[str], text: str) -> bool:
    head = parts[0]
    if not (text.startswith(head) or head.startswith(text)):
        return False
    if len(text) <= len(head):
        return True
    rest = text[len(head):]
    return len(parts) > 1 and any(_starts_alike(parts[1:], rest[cut:]) for cut in range(len(rest) + 1))


# How the code prints a failure.


def printed(command: Callable[[], int]) -> Line:
    """The one line a command ends with (`error: ` on stderr), and its exit status."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        status = command()
    text = stderr.getvalue()
    assert text.startswith("error: "), text
    return Line(text.removeprefix("error: ").splitlines()[0], status)


def command_line(error: BaseException) -> Line:
    """What a command (or `run`, before and after its query) ends with when it meets `error`."""
    def handler(_: argparse.Namespace) -> int:
        raise error

    parser = argparse.ArgumentParser()
    parser.set_defaults(handler=handler)
    return printed(lambda: cli.run_command(parser, []))


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def restart_line(judged: FailureVerdict) -> Line:
    """The line the runner logs before the restart strategy restarts the query."""
    records = _Records()
    runner.log.addHandler(records)
    try:
        strategy = runner.RestartStrategy("fixed-delay", attempts=1, delay=0.0, max_delay=0.0, interval=60.0)
        assert runner._restarts_after_delay(strategy, judged, runner.StopRequested())
    finally:
        runner.log.removeHandler(records)
    return Line(next(line for line in records.lines if judged.line in line), None)


def giving_up_lines(judged: FailureVerdict) -> list[Line]:
    """The restart strategy's last word after `judged`, for each strategy."""
    lines = []
    for kind in get_args(RestartStrategyKind):
        strategy = runner.RestartStrategy(kind, attempts=0, delay=0.0, max_delay=0.0, interval=60.0)
        with pytest.raises(StoppedForGood) as gave_up:
            runner._restarts_after_delay(strategy, judged, runner.StopRequested())
        lines.append(command_line(gave_up.value))
    return lines


def startup_line(error: BaseException) -> Line:
    """A Kafka outage at start-up, past kafka_outage_tolerance_seconds."""
    config: Any = SimpleNamespace(bootstrap_servers=MESSAGE, kafka_outage_tolerance_seconds=-1.0)

    def checks() -> None:
        raise error

    with pytest.raises(StoppedForGood) as gave_up:
        preflight.outages_waited_out(config, checks)
    return command_line(gave_up.value)


def lines_of(error: BaseException) -> list[Line]:
    """Every line the job prints for `error`: met by a command or at start-up, and met by the query."""
    judged = verdict(error)
    lines = [command_line(error)]
    ending = runner.query_failure_ending(judged)
    if ending is not None:
        lines.append(command_line(ending))
    elif judged.outcome is Outcome.ASKED_TO_STOP:  # the sink ends the query with it: Spark's log shows it
        lines.append(Line(judged.line, None))
    else:
        lines.append(restart_line(judged))
    if judged.outcome is Outcome.RIDE_OUT:
        lines.append(startup_line(error))
    return lines


# What the package raises.


def _sources() -> dict[str, ast.Module]:
    return {str(path.relative_to(PACKAGE)): ast.parse(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))}


def _name(node: ast.expr) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


class _Raisers(ast.NodeVisitor):
    """Per class name, the innermost functions that construct it (`Name(...)`, `Name.of(...)`); per
    function name, its calls, and whether each is in a `try` whose handlers catch a class."""

    def __init__(self) -> None:
        self.functions: list[str] = []
        self.caught: list[set[str]] = []
        self.makers: dict[str, set[str]] = {}
        self.calls: dict[str, list[set[str]]] = {}

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Try(self, node: ast.Try) -> None:
        names = set()
        for handler in node.handlers:
            types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            names |= {name for kind in types if kind is not None and (name := _name(kind))}
        self.caught.append(names)
        for statement in node.body:
            self.visit(statement)
        self.caught.pop()
        for statement in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(statement)

    def visit_Call(self, node: ast.Call) -> None:
        made = node.func.value if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            else node.func
        if (name := _name(made)) is not None:  # at a module's top level: a maker nothing calls, so it goes on
            self.makers.setdefault(name, set()).add(self.functions[-1] if self.functions else "<module>")
        if (called := _name(node.func)) is not None:
            self.calls.setdefault(called, []).append(set().union(*self.caught))
        self.generic_visit(node)


@pytest.fixture(scope="module")
def raisers() -> _Raisers:
    found = _Raisers()
    for tree in _sources().values():
        found.visit(tree)
    return found


def failure_classes() -> list[type[JobFailure]]:
    return [cls for cls in exception_classes() if issubclass(cls, JobFailure)]


def reaches_the_user(cls: type[JobFailure], raisers: _Raisers) -> bool:
    """Whether the job's code makes `cls` and lets it go: a class it never constructs (a base, or
    one its tools raise) does not, nor one that every caller of the functions making it catches
    (the sink's log turns ConditionalWriteFailed into its own SinkLogConflict)."""
    makers = raisers.makers.get(cls.__name__, set())
    # Caught by its own name: a handler of a base class (Exception) may let it go on.
    return any(not calls or any(cls.__name__ not in caught for caught in calls)
               for calls in (raisers.calls.get(maker, []) for maker in makers))


def instance(cls: type[JobFailure]) -> JobFailure:
    """`cls` with "..." for its message (and "<name>" for the option it names)."""
    wanted = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self" and p.default is p.empty and p.kind is not p.VAR_POSITIONAL
              and p.kind is not p.VAR_KEYWORD]
    return cls(*[OPTION if p.name == "option" else MESSAGE for p in wanted]) if wanted else cls(MESSAGE)


def kafka_errors() -> dict[str, KafkaException]:
    """A Kafka client's error per outcome and option its code can have (failures.kafka_outcome)."""
    codes: dict[tuple[Outcome, str | None], int] = {}
    for code, judged in sorted(failures._kafka_table().items()):
        codes.setdefault(judged, code)
    errors = {f"Kafka {KafkaError(code).name()}": KafkaException(KafkaError(code, MESSAGE)) for code in codes.values()}
    # A code not in the table: a fatal one halts, any other is retried.
    errors["Kafka fatal"] = KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, MESSAGE, fatal=True))
    errors["Kafka other"] = KafkaException(KafkaError(KafkaError.UNKNOWN, MESSAGE))
    return errors


def heartbeat_reasons(directory: Path) -> tuple[str, str]:
    """The heartbeat's reasons to stop, as it words them: another driver took over the checkpoint;
    its file could not be written (under a file, not a directory). The locations are "..."."""
    taken = directory / "taken"
    taken.mkdir()
    now = time.time()
    (taken / HEARTBEAT).write_text(json.dumps({"host": "another", "pid": 1, "started_at": now + 60, "at": now}))
    newer = Heartbeat(str(taken), print, print).newer_driver()
    assert newer is not None
    (directory / "file").write_text("")
    unwritable = str(directory / "file" / "checkpoint")
    lost: list[str] = []

    def on_lost(reason: str) -> None:
        lost.append(reason)
        heartbeat.done.set()

    heartbeat = Heartbeat(unwritable, print, on_lost, interval=0.0, stop_after=0.0)
    heartbeat.run()  # here, not in a thread: it returns once it said it was lost
    return newer.replace(str(taken), MESSAGE), lost[0].replace(unwritable, MESSAGE)


@pytest.fixture(scope="module")
def lines(raisers: _Raisers, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Line]]:
    """Per failure, the lines the job prints for it; each needs a row that shows one of them. The
    restart strategy's, the start-up's and the heartbeat's endings each need a row of their own."""
    found = {f"{cls.__module__}.{cls.__name__}": lines_of(instance(cls))
             for cls in failure_classes() if not issubclass(cls, StoppedForGood) and reaches_the_user(cls, raisers)}
    found |= {what: lines_of(error) for what, error in kafka_errors().items()}
    retried = verdict(instance(failures.KafkaUnreachable))
    for kind, line in zip(get_args(RestartStrategyKind), giving_up_lines(retried), strict=True):
        found[f"giving up ({kind})"] = [line]
    found["an outage at start-up"] = [startup_line(instance(preflight.KafkaNotAnswering))]
    newer, lost = heartbeat_reasons(tmp_path_factory.mktemp("heartbeat"))
    endings = {"taken over": runner.heartbeat_ending([], [newer]),
               "heartbeat lost": runner.heartbeat_ending([lost], []),
               "taken over, found after a failure": runner.query_failure_ending(retried, lambda: newer)}
    for what, ending in endings.items():
        assert ending is not None
        found[what] = [command_line(ending)]
    found["status --check without a limit"] = [printed(lambda: cli.run_command(cli.build_parser(),
                                                                               ["status", "--check"]))]
    return found


@pytest.fixture(scope="module")
def option_lines() -> list[Line]:
    """A configuration error for each option the code names in one (`ConfigError("sink_id", ...)`):
    lines the code prints, which the generic row stands for."""
    kinds = {cls.__name__ for cls in failure_classes() if issubclass(cls, ConfigError)}
    options = {node.args[0].value for tree in _sources().values() for node in ast.walk(tree)
               if isinstance(node, ast.Call) and _name(node.func) in kinds and node.args
               and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}
    assert len(options) > 10, options
    return [command_line(ConfigError(option, MESSAGE)) for option in sorted(options)]


def test_every_line_the_job_stops_with_has_a_row(lines: dict[str, list[Line]]) -> None:
    table = rows()
    assert len(lines) > 25, sorted(lines)  # the package's failures, Kafka's, and the endings were found
    unfixed = {what: [line.text for line in found if not line.prefix] for what, found in lines.items()}
    assert not {what: texts for what, texts in unfixed.items() if texts}, "lines no row can be found by"
    missing = {what: [f"{line.text} (exit {line.exit})" for line in found]
               for what, found in lines.items() if not any(shows(row, line) for row in table for line in found)}
    assert not missing, f"failures without a row in docs/troubleshooting.md: {missing}"


def test_every_row_shows_what_the_code_prints(lines: dict[str, list[Line]], option_lines: list[Line]) -> None:
    """Each row's text, but for its placeholders, is in the code's strings or in a line made here;
    a row with an exit status shows a line that ends with it."""
    made = [line for found in lines.values() for line in found] + option_lines
    strings = {node.value for tree in _sources().values() for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str)} | {line.text for line in made}
    for row in rows():
        # The part a line made here fixes, then the message: the code's strings, a placeholder between two.
        head = max((line.prefix for line in made if row.text.startswith(line.prefix)), key=len, default="")
        rest = (part.strip() for part in PLACEHOLDER.split(row.text[len(head):]))
        fragments = [head, *(part for part in rest if len(part) >= 3)]
        unknown = [part for part in fragments if not any(part in text for text in strings)]
        assert not unknown, f"the code prints none of {unknown} (row `{row.text}`)"
        if row.exit is not None:
            assert any(shows(row, line) for line in made), f"no line ends with exit {row.exit}: `{row.text}`"


def test_the_failure_lines_name_the_jobs_own_exception_whatever_its_suffix(raisers: _Raisers) -> None:
    """The restart's line, its JSON event and the restart strategy's last word keep the sink's own
    names (MarkersUndecided, SinkLogConflict), not only names that end in Error or Exception."""
    for cls in failure_classes():
        if issubclass(cls, StoppedForGood) or not reaches_the_user(cls, raisers):
            continue
        judged = verdict(instance(cls))
        if judged.outcome in (Outcome.RETRY, Outcome.RIDE_OUT):
            assert restart_line(judged).text.startswith(f"query failed: {cls.__name__}: ")
            assert all(f"; last failure: {cls.__name__}: " in line.text for line in giving_up_lines(judged))
        elif judged.outcome in (Outcome.CANNOT_CONTINUE, Outcome.TAKEN_OVER):
            assert command_line(runner.query_failure_ending(judged) or judged).text.startswith(
                f"stopping: {cls.__name__}: ")


def test_the_restart_event_names_the_failure() -> None:
    from {{ cookiecutter.package_name }}.sink.marker import MarkersUndecided

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    runner.log.addHandler(handler)
    try:
        strategy = runner.RestartStrategy("fixed-delay", attempts=1, delay=0.0, max_delay=0.0, interval=60.0)
        runner._restarts_after_delay(strategy, verdict(MarkersUndecided("held open")), runner.StopRequested())
    finally:
        runner.log.removeHandler(handler)
    events = [getattr(record, "event", {}) for record in records]
    assert {"event": "failure", "error": "MarkersUndecided: held open"}.items() <= events[0].items(), events
