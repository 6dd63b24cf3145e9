"""Parse JSON event values into the configured schema, in the JVM: Spark's variant type
(`try_parse_json`, `variant_get`) and plain column expressions, so no record is handed to
Python to be parsed. Anything that does not fit becomes a dead letter with a reason.

No input can fail the job: invalid UTF-8, lone surrogates, deep nesting, numbers past 64 bits
or past a double, empty and null values all end as dead letters (see the unit tests)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..config import JobConfig

if TYPE_CHECKING:
    from ..formats.avro_input import AvroInput
    from ..formats.protobuf_input import ProtobufInput

# Whether a record is an event (true) or a dead letter (false); never null.
IS_EVENT = "is_event"
# The column that carries a dead letter's reason; null for an event.
REASON = "dead_letter_reason"
SOURCE_COLUMNS = ("topic", "partition", "offset")
# A record's Kafka headers (Spark's Kafka source column, `array<struct<key STRING, value BINARY>>`,
# null for none), where the job reads them (query.KEEPS_HEADERS).
HEADERS = "headers"

SPARK_TYPES = {"string": "STRING", "int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN"}
# JSON whitespace (RFC 8259), allowed around the document.
_JSON_SPACE = " \t\r\n"

{%- if cookiecutter.query == "windowed-count" %}

# An event time (epoch milliseconds) the windows can hold: 1970-01-01 up to the end of year 9999.
MAX_EVENT_TIME_MS = 253_402_300_799_999
{%- endif %}


@dataclass(frozen=True)
class EventSchema:
    fields: dict[str, str]
    key_field: str
    max_record_bytes: int
{%- if cookiecutter.query == "windowed-count" %}
    event_time_field: str | None = None  # a field every event must have, an epoch-milliseconds time
{%- endif %}
    # Input under a schema registry (avro_parsing.py, protobuf_parsing.py): what its plan knows;
    # None: JSON (decoding.py)
    plan: AvroInput | ProtobufInput | None = None

    def fields_ddl(self) -> str:
        """The event's fields: all the job's filter may read."""
        return ", ".join(f"`{name}` {SPARK_TYPES[kind]}" for name, kind in self.fields.items())


def event_schema(config: JobConfig, plan: AvroInput | ProtobufInput | None = None) -> EventSchema:
    return EventSchema(fields=dict(config.schema), key_field=config.key_field, max_record_bytes=config.max_record_bytes
{%- if cookiecutter.query == "windowed-count" %},
                       event_time_field=config.event_time_field
{%- endif %},
                       plan=plan)


# A check of a record: the condition that makes it a dead letter, and the reason to give.
Check = tuple[Column, Column]


def parse_records(records: DataFrame, schema: EventSchema) -> DataFrame:
    """Kafka records (Spark's Kafka source columns) to parsed events, or dead letters with a reason.

    Four projections, each expensive value computed once and then referenced: the document,
    each field's variant, whether the record is an event, the output. Spark keeps a projection
    apart when merging it would copy a costly expression into several places (CollapseProject),
    so each record pays for one extraction per field and one pass over the checks.

    The checks decide `is_event` alone; the reason text is computed only for dead letters, and
    a query that reads `is_event` and not the reason (the count) has no reason text in its plan
    at all: Spark generates the code of the whole plan again for every batch, so its size costs
    the driver time on each one."""
    document = "_document"
    field_columns = {name: f"_field_{i}" for i, name in enumerate(schema.fields)}
    headers = [HEADERS] if HEADERS in records.columns else []  # kept as they are (query.KEEPS_HEADERS)
    parsed = records.select(
        "value", "topic", "partition", "offset", *headers,
        F.when(F.col("value").isNotNull(), F.try_parse_json(F.col("value").cast("string"))).alias(document),
    )
    with_fields = parsed.select(
        "*", *[_field(F.col(document), name).alias(column) for name, column in field_columns.items()])
    fields = {name: F.col(column) for name, column in field_columns.items()}
    checks = dead_letter_checks(F.col("value"), F.col(document), fields, schema)
    typed = {name: _typed(fields[name], kind) for name, kind in schema.fields.items()}
    return checked_events(with_fields, typed, checks, schema, headers)


def checked_events(records: DataFrame, typed: dict[str, Column], checks: list[Check], schema: EventSchema,
                   headers: list[str]) -> DataFrame:
    """The parse's last two projections, whatever the format: whether each record is an event
    (`checks`), then the event's typed fields, or the dead letter's reason and raw bytes."""
    checked = records.select("*", is_event(checks).alias(IS_EVENT))
    event = F.col(IS_EVENT)
    return checked.select(
        *[F.when(event, column).alias(name) for name, column in typed.items()],
        IS_EVENT,
        F.when(~event, first_reason(checks)).alias(REASON),
        "topic",
        F.col("partition").cast("int").alias("partition"),
        "offset",
{%- if cookiecutter.query == "windowed-count" %}
        # The raw bytes only for dead letters; with an event time, for every record: an event
        # found late after the shuffle becomes a dead letter there (windowed_counting.py).
        (F.col("value") if schema.event_time_field else F.when(~event, F.col("value"))).alias("raw_value"),
{%- else %}
        F.when(~event, F.col("value")).alias("raw_value"),  # the raw bytes only for dead letters
{%- endif %}
        *headers,
    )


def is_event(checks: list[Check]) -> Column:
    """No check holds. OR evaluates left to right and stops at the first true, like CASE; a
    check that is null counts as not holding, as in CASE."""
    any_holds = checks[0][0]
    for condition, _ in checks[1:]:
        any_holds = any_holds | condition
    return ~F.coalesce(any_holds, F.lit(False))


def first_reason(checks: list[Check]) -> Column:
    """The reason of the first check that holds; null when none does (an event)."""
    (condition, reason), *rest = checks
    case = F.when(condition, reason)
    for condition, reason in rest:
        case = case.when(condition, reason)
    return case


def dead_letter_checks(value: Column, doc: Column, fields: dict[str, Column], schema: EventSchema) -> list[Check]:
    """A record's checks in order, each run only on a record that passed the ones before it (so
    the costly ones run on records that got that far). `fields` holds each schema field's
    variant (`_field`). Every reason is non-null."""
    size = F.octet_length(value)
    text = value.cast("string")
    checks: list[Check] = [
        (value.isNull(), F.lit("empty value (null)")),
        (size > schema.max_record_bytes,
         F.format_string(f"oversized: %d bytes > max_record_bytes {schema.max_record_bytes}", size)),
        (~F.is_valid_utf8(value), F.lit("not JSON: invalid UTF-8")),
        (size == 0, F.lit("not JSON: empty value")),
        (doc.isNull(), F.lit("not JSON: cannot be parsed (syntax, lone surrogate or nesting too deep)")),
        (~_starts_an_object(text), F.concat(F.lit("not a JSON object: "), _document_type(text))),
        (_content_after_the_object(value, text), F.lit("not JSON: content after the object")),
    ]
    for name, kind in schema.fields.items():
        field = fields[name]
        missing = field.isNull() | F.is_variant_null(field)
        if name == schema.key_field:
            checks.append((missing, F.lit(f"missing key field {name!r}")))
{%- if cookiecutter.query == "windowed-count" %}
        elif name == schema.event_time_field:
            checks.append((missing, F.lit(f"missing event-time field {name!r}")))
{%- endif %}
        found = F.schema_of_variant(field)
        checks.append((
            ~missing & ~_has_type(found, kind),
            F.concat(F.lit(f"field {name!r} has JSON type "), _json_type(found), F.lit(f", expected {kind}")),
        ))
{%- if cookiecutter.query == "windowed-count" %}
        if name == schema.event_time_field:
            time = _typed(field, kind)
            checks.append((~time.between(0, MAX_EVENT_TIME_MS), F.format_string(
                f"event-time field {name!r} is %d, outside 0 to {MAX_EVENT_TIME_MS} (epoch milliseconds)", time)))
{%- endif %}
    return checks


def _starts_an_object(text: Column) -> Column:
    """Whether a parsed document is an object. Most start with `{` at once: a byte compare,
    before the trim (which copies the text)."""
    return F.startswith(text, F.lit("{")) | F.startswith(F.ltrim(text, F.lit(_JSON_SPACE)), F.lit("{"))


def _content_after_the_object(value: Column, text: Column) -> Column:
    """True when text that starts with a parsed object goes on after it: the variant parser stops
    after the first value, so `{"k": 1} {"k": 2}` alone would count one event and drop the rest.

    Most events are flat: their only `}` is their last byte, which rules out trailing content
    (a `}` byte is never part of another UTF-8 character) at the cost of a byte search. Any
    other text is parsed again, wrapped twice: as `[text]` it must be an array of exactly one
    value, as `{"k":text}` an object. Whatever follows the first value breaks one of the two:
    `,` adds an array element, `}` breaks the array, `]` breaks the object, anything else
    breaks both."""
    before_the_last_byte = F.substring(value, F.lit(1), F.octet_length(value) - 1).cast("string")
    flat = F.endswith(text, F.lit("}")) & ~F.contains(before_the_last_byte, F.lit("}"))
    as_array = F.try_parse_json(F.concat(F.lit("["), text, F.lit("]")))
    array_values = F.coalesce(F.array_size(F.try_variant_get(as_array, "$", "array<variant>")), F.lit(0))
    as_object = F.try_parse_json(F.concat(F.lit('{"k":'), text, F.lit("}")))
    return ~flat & ((array_values != 1) | as_object.isNull())


def _field(doc: Column, name: str) -> Column:
    """The field as a variant: SQL null when absent, a variant null for JSON null."""
    return F.variant_get(doc, _path(name), "variant")


def _path(name: str) -> str:
    """A variant path to the field. The path syntax has no escapes: a name is quoted with
    whichever quote it does not contain (config.validated refuses a name with both)."""
    return f'$["{name}"]' if "'" in name else f"$['{name}']"


def _typed(field: Column, kind: str) -> Column:
    # try_: a JSON null gives SQL null; the type itself was checked by dead_letter_reason.
    return F.try_variant_get(field, "$", SPARK_TYPES[kind])


def _has_type(found: Column, kind: str) -> Column:
    """A JSON value's variant type against the schema's type. Integers past 64 bits are
    DECIMAL(n,0) and so not an int; a float accepts any JSON number."""
    if kind == "string":
        return found == "STRING"
    if kind == "int":
        return found == "BIGINT"
    if kind == "bool":
        return found == "BOOLEAN"
    return found.isin("BIGINT", "DOUBLE", "FLOAT") | found.startswith("DECIMAL")


def _json_type(found: Column) -> Column:
    return (
        F.when(found == "STRING", F.lit("string"))
        .when(found == "BOOLEAN", F.lit("boolean"))
        .when(found.startswith("OBJECT"), F.lit("object"))
        .when(found.startswith("ARRAY"), F.lit("array"))
        .otherwise(F.lit("number"))
    )


def _document_type(text: Column) -> Column:
    """The JSON type of a document that parsed, from its first character."""
    first = F.substring(F.ltrim(text, F.lit(_JSON_SPACE)), 1, 1)
    return (
        F.when(first == "[", F.lit("array"))
        .when(first == '"', F.lit("string"))
        .when(first.isin("t", "f"), F.lit("boolean"))
        .when(first == "n", F.lit("null"))
        .otherwise(F.lit("number"))
    )
