"""Parse JSON event values into the configured schema; anything that does not fit becomes
a dead letter with a reason. Pure Python over Arrow batches: testable without Spark."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

# The column that carries a dead letter's reason; null for a good record.
REASON = "dead_letter_reason"
SOURCE_COLUMNS = ("topic", "partition", "offset")

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
}
_ARROW_TYPES = {"string": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_()}
_SPARK_TYPES = {"string": "STRING", "int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN"}


@dataclass(frozen=True)
class EventSchema:
    fields: dict[str, str]
    key_field: str
    max_record_bytes: int

    def arrow_schema(self) -> pa.Schema:
        """Parsed fields, the dead-letter reason, and the source coordinates with the raw value."""
        return pa.schema(
            [pa.field(name, _ARROW_TYPES[kind]) for name, kind in self.fields.items()]
            + [
                pa.field(REASON, pa.string()),
                pa.field("topic", pa.string()),
                pa.field("partition", pa.int32()),
                pa.field("offset", pa.int64()),
                pa.field("raw_value", pa.binary()),
            ]
        )

    def spark_ddl(self) -> str:
        names = [f"`{name}` {_SPARK_TYPES[kind]}" for name, kind in self.fields.items()]
        return ", ".join(
            [*names, f"{REASON} STRING", "topic STRING", "partition INT", "offset BIGINT", "raw_value BINARY"]
        )


def parse_value(value: bytes | None, schema: EventSchema) -> tuple[dict[str, Any] | None, str | None]:
    """Return (fields, None) for a good event or (None, reason) for a dead letter."""
    if value is None:
        return None, "empty value (null)"
    if len(value) > schema.max_record_bytes:
        return None, f"oversized: {len(value)} bytes > max_record_bytes {schema.max_record_bytes}"
    try:
        document = json.loads(value)
    except UnicodeDecodeError:
        return None, "not JSON: invalid UTF-8"
    except ValueError as error:
        return None, f"not JSON: {error}"
    if not isinstance(document, dict):
        return None, f"not a JSON object: {type(document).__name__}"
    parsed: dict[str, Any] = {}
    for name, kind in schema.fields.items():
        field_value = document.get(name)
        if field_value is None:
            if name == schema.key_field:
                return None, f"missing key field {name!r}"
            parsed[name] = None
            continue
        wanted = _PYTHON_TYPES[kind]
        # bool is an int in Python; JSON true must not pass as a number (nor 1 as a bool).
        if not isinstance(field_value, wanted) or (kind in ("int", "float") and isinstance(field_value, bool)):
            return None, f"field {name!r} has JSON type {_json_type(field_value)}, expected {kind}"
        parsed[name] = float(field_value) if kind == "float" else field_value
    return parsed, None


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def parse_batch(batch: pa.RecordBatch, schema: EventSchema) -> pa.RecordBatch:
    """Parse one batch of Kafka records (columns topic, partition, offset, value)."""
    columns: dict[str, list[Any]] = {name: [] for name in schema.fields}
    reasons: list[str | None] = []
    raw_values: list[bytes | None] = []
    for value in batch.column("value").to_pylist():
        parsed, reason = parse_value(value, schema)
        reasons.append(reason)
        raw_values.append(value if reason else None)  # keep the raw bytes only for dead letters
        for name in schema.fields:
            columns[name].append(parsed[name] if parsed else None)
    arrow_schema = schema.arrow_schema()
    arrays = [pa.array(columns[name], type=arrow_schema.field(name).type) for name in schema.fields]
    arrays += [
        pa.array(reasons, pa.string()),
        batch.column("topic").cast(pa.string()),
        batch.column("partition").cast(pa.int32()),
        batch.column("offset").cast(pa.int64()),
        pa.array(raw_values, pa.binary()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def parse_batches(batches: Iterator[pa.RecordBatch], schema: EventSchema) -> Iterator[pa.RecordBatch]:
    """The function Spark's `mapInArrow` runs on each partition."""
    for batch in batches:
        if batch.num_rows:
            yield parse_batch(batch, schema)
