"""Validate every answer before anything is rendered.

Answers are read as data (through `tojson`, inside `main`), never pasted into Python source, so no
answer can run as code. `problems(answers)` is pure: the template's tests load this file by path and
call it directly. Each problem reads `<question>: <value!r>: <rule>`; the hook prints them as
`error: ...` and exits 1: cookiecutter then stops and removes the project directory it had begun.
"""

from __future__ import annotations

import json
import keyword
import math
import re
import sys
from collections.abc import Callable

Answers = dict[str, object]

SLUG = re.compile(r"[a-z][a-z0-9-]*")
PACKAGE = re.compile(r"[a-z_][a-z0-9_]*")
TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Plain decimals only: the values are pasted into Python and TOML, where `.5`, `007` or `1e3` differ.
POSITIVE_NUMBER = re.compile(r"(0|[1-9][0-9]*)(\.[0-9]+)?")
NON_NEGATIVE_INT = re.compile(r"0|[1-9][0-9]*")
URI_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")  # what Hadoop's Path reads as a scheme
CHECKPOINT_SCHEMES = ("file", "hdfs", "s3", "s3a", "gs", "abfs", "abfss")
# Import names the rendered project depends on; a package of the same name would hide them.
DEPENDENCIES = ("pyspark", "py4j", "confluent_kafka", "pyarrow", "pandas", "numpy", "google", "boto3", "botocore",
                "pytest", "testcontainers")
TOPIC_QUESTIONS = ("input_topic", "output_topic", "dead_letter_topic", "marker_topic")
CHOICES = {
    "delivery_guarantee": ("exactly-once", "at-least-once"),
    "include_github_actions": ("yes", "no"),
    "include_deployment": ("yes", "no"),
}
# Pasted between double quotes in the rendered project (Python docstrings and strings, TOML, shell).
QUOTE_FREE = ("project_name", "description", "checkpoint_location", "transactional_id_prefix")


def _text(value: object, max_length: int) -> str | None:
    """The rule a free-text answer breaks, if any: one printable line of bounded length."""
    text = str(value)
    if not text.strip():
        return "must not be empty"
    if len(text) > max_length:
        return f"must be at most {max_length} characters, not {len(text)}"
    if any(not ch.isprintable() for ch in text):
        return "must be one line of printable characters (no tabs, newlines or control characters)"
    return None


def _project_slug(value: str) -> str | None:
    if not SLUG.fullmatch(value) or value.endswith("-"):
        return ("must be lower-case letters, digits and hyphens, start with a letter and not end with a "
                "hyphen (e.g. color-counts)")
    if len(value) > 64:
        return f"must be at most 64 characters, not {len(value)}"
    return None


def _package_name(value: str) -> str | None:
    if not PACKAGE.fullmatch(value):
        return ("must be a Python package name: lower-case letters, digits and underscores, not starting "
                "with a digit (e.g. color_counts)")
    if len(value) > 64:
        return f"must be at most 64 characters, not {len(value)}"
    if keyword.iskeyword(value):
        return "must not be a Python keyword"
    if value in sys.stdlib_module_names:
        return "must not be the name of a standard-library module, which it would shadow"
    if value in DEPENDENCIES:
        return f"must not be the name of a dependency ({', '.join(DEPENDENCIES)}), which it would shadow"
    return None


def _topic(value: str) -> str | None:
    if not TOPIC.fullmatch(value) or len(value) > 249 or value in (".", ".."):
        return "must be a Kafka topic name: 1 to 249 of a-z A-Z 0-9 . _ -, and not '.' or '..'"
    return None


def _transactional_id_prefix(value: str) -> str | None:
    if not value:
        return "must not be empty"
    if len(value) > 200:
        return f"must be at most 200 characters, not {len(value)}"
    if any(not ("!" <= ch <= "~") or ch in "\"'\\" for ch in value):
        return "must be printable ASCII without whitespace, quotes or backslashes"
    return None


def _key_field(value: str) -> str | None:
    if not FIELD.fullmatch(value):
        return "must be a JSON field name: letters, digits and underscores, not starting with a digit"
    return None


def _filter_expression(value: str) -> str | None:
    try:
        parse_filter(value)
    except FilterSyntaxError as error:
        return f"must be a Spark SQL boolean expression: {error}"
    return None


def _trigger_interval_seconds(value: str) -> str | None:
    if not POSITIVE_NUMBER.fullmatch(value) or not math.isfinite(float(value)) or float(value) <= 0:
        return "must be a positive number of seconds, written like 2 or 0.5"
    return None


def _state_ttl_seconds(value: str) -> str | None:
    if not NON_NEGATIVE_INT.fullmatch(value):
        return "must be a whole number of seconds, 0 or more, written like 0 or 3600 (0 = keep counts forever)"
    return None


def _checkpoint_location(value: str) -> str | None:
    if problem := _text(value, 1000):
        return problem
    if value != value.strip():
        return "must not start or end with spaces"
    scheme = URI_SCHEME.match(value)
    if scheme is None:
        return None  # a local path, relative to the job's working directory or absolute
    name, rest = scheme.group(1).lower(), value[scheme.end():]
    if name not in CHECKPOINT_SCHEMES:
        return f"must be a local path or a URI with scheme {', '.join(CHECKPOINT_SCHEMES)}, not {name}:"
    if name == "file":
        return None if re.fullmatch(r"///.*[^/].*", rest) else "a file: URI must name an absolute path (file:///path)"
    if not re.fullmatch(r"//[^/]+(/.*)?", rest):
        return f"a {name}: URI must name its bucket, container or host ({name}://<name>/<path>)"
    return None


RULES: dict[str, Callable[[str], str | None]] = {
    "project_name": lambda value: _text(value, 100),
    "project_slug": _project_slug,
    "package_name": _package_name,
    "description": lambda value: _text(value, 300),
    **dict.fromkeys(TOPIC_QUESTIONS, _topic),
    "key_field": _key_field,
    "filter_expression": _filter_expression,
    "trigger_interval_seconds": _trigger_interval_seconds,
    "state_ttl_seconds": _state_ttl_seconds,
    "checkpoint_location": _checkpoint_location,
    "transactional_id_prefix": _transactional_id_prefix,
}


def problems(answers: Answers) -> list[str]:
    """Every broken rule, as `<question>: <value!r>: <rule>`; empty when all answers are good."""
    found: list[str] = []

    def add(question: str, rule: str) -> None:
        found.append(f"{question}: {answers.get(question)!r}: {rule}")

    for question, rule in RULES.items():
        value = answers.get(question)
        if value is None:
            add(question, "is missing")
        elif (problem := rule(str(value))) is not None:
            add(question, problem)
        elif question in QUOTE_FREE and any(ch in "\"\\" for ch in str(value)):
            add(question, "must not contain double quotes or backslashes")
    for question, allowed in CHOICES.items():
        if answers.get(question) not in allowed:
            add(question, f"must be one of {', '.join(allowed)}")

    # Kafka refuses two topics whose names differ only in '.' versus '_' (their metric names collide).
    seen: dict[str, str] = {}
    for question in TOPIC_QUESTIONS:
        key = str(answers.get(question)).replace(".", "_")
        if key in seen:
            add(question, f"must differ from {seen[key]} (Kafka treats '.' and '_' in topic names as the same)")
        else:
            seen[key] = question
    return found


# --- a parser for the subset of Spark SQL boolean expressions that a filter needs ----------------------

class FilterSyntaxError(ValueError):
    pass


TOKEN = re.compile(
    r"""(?P<space>\s+)
      | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
      | (?P<number>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[LSYDlsyd]?(?![A-Za-z_]))
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)
      | (?P<op><=>|==|!=|<>|<=|>=|\|\||[=<>+\-*/%(),.!])""",
    re.VERBOSE,
)
KEYWORDS = {"and", "or", "not", "is", "null", "in", "like", "rlike", "between", "true", "false"}
COMPARISONS = {"=", "==", "!=", "<>", "<", "<=", ">", ">=", "<=>"}


def _tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, position) triples; kind is string, number, name, keyword or op. String literals are
    consumed whole, so a ';' or '--' inside one is data, not a statement separator or a comment."""
    tokens, position = [], 0
    while position < len(text):
        if text.startswith(("--", "/*"), position):
            raise FilterSyntaxError(f"comment at position {position}: comments are not allowed")
        if text[position] == ";":
            raise FilterSyntaxError(f"semicolon at position {position}: a filter is one expression")
        match = TOKEN.match(text, position)
        if match is None:
            if text[position] in "'\"`":
                raise FilterSyntaxError(f"unclosed quote {text[position]} at position {position}")
            raise FilterSyntaxError(f"unexpected {text[position]!r} at position {position}")
        kind = match.lastgroup or ""
        if kind == "name" and match.group().lower() in KEYWORDS:
            kind = "keyword"
        if kind != "space":
            tokens.append((kind, match.group(), position))
        position = match.end()
    return tokens


class _Parser:
    """Recursive descent; precedence from loosest: OR, AND, NOT, predicates, + - ||, * / %, unary."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.index = 0
        self.end = len(text)

    def peek(self, *values: str) -> bool:
        if self.index >= len(self.tokens):
            return False
        kind, text, _ = self.tokens[self.index]
        return (text.lower() if kind == "keyword" else text) in values and kind in ("keyword", "op")

    def accept(self, *values: str) -> bool:
        if self.peek(*values):
            self.index += 1
            return True
        return False

    def expect(self, value: str) -> None:
        if not self.accept(value):
            self.fail(f"expected {value.upper()}")

    def fail(self, what: str) -> None:
        if self.index < len(self.tokens):
            _, text, position = self.tokens[self.index]
            raise FilterSyntaxError(f"{what} at position {position}, found {text!r}")
        raise FilterSyntaxError(f"{what} at the end of the expression")

    def parse(self) -> None:
        if not self.tokens:
            raise FilterSyntaxError("it is empty; use true to count every event")
        self.disjunction()
        if self.index < len(self.tokens):
            self.fail("expected AND, OR or the end of the expression")

    def disjunction(self) -> None:
        self.conjunction()
        while self.accept("or"):
            self.conjunction()

    def conjunction(self) -> None:
        self.negation()
        while self.accept("and"):
            self.negation()

    def negation(self) -> None:
        if self.accept("not", "!"):
            self.negation()
        else:
            self.predicate()

    def predicate(self) -> None:
        self.additive()
        if self.accept(*COMPARISONS):
            self.additive()
        elif self.accept("is"):
            self.accept("not")
            if not self.accept("null", "true", "false"):
                self.fail("expected NULL, TRUE or FALSE after IS")
        else:
            negated = self.accept("not")
            if self.accept("in"):
                self.expect("(")
                self.list_of_values()
            elif self.accept("like", "rlike"):
                self.additive()
            elif self.accept("between"):
                self.additive()
                self.expect("and")
                self.additive()
            elif negated:
                self.fail("expected IN, LIKE, RLIKE or BETWEEN after NOT")

    def list_of_values(self) -> None:
        self.disjunction()
        while self.accept(","):
            self.disjunction()
        self.expect(")")

    def additive(self) -> None:
        self.multiplicative()
        while self.accept("+", "-", "||"):
            self.multiplicative()

    def multiplicative(self) -> None:
        self.unary()
        while self.accept("*", "/", "%"):
            self.unary()

    def unary(self) -> None:
        if self.accept("-", "+"):
            self.unary()
        else:
            self.primary()

    def primary(self) -> None:
        if self.index >= len(self.tokens):
            self.fail("expected a value")
        kind = self.tokens[self.index][0]
        if self.accept("("):
            self.disjunction()
            self.expect(")")
        elif kind == "string":
            while self.index < len(self.tokens) and self.tokens[self.index][0] == "string":
                self.index += 1  # adjacent literals concatenate, so 'it''s' works
        elif kind == "number":
            self.index += 1
        elif self.accept("null", "true", "false"):
            pass
        elif kind == "name":
            self.index += 1
            while self.accept("."):  # struct field: payload.color
                if self.index >= len(self.tokens) or self.tokens[self.index][0] != "name":
                    self.fail("expected a field name after '.'")
                self.index += 1
            if self.accept("(") and not self.accept(")"):  # function call: lower(color), now()
                self.list_of_values()
        else:
            self.fail("expected a column, a literal or '('")


def parse_filter(text: str) -> None:
    """Raise FilterSyntaxError, saying where, unless `text` is in the supported subset."""
    _Parser(text).parse()


def main() -> int:
    answers = json.loads(r"""{{ cookiecutter | tojson }}""")
    errors = problems(answers)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
