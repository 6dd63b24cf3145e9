"""The output records, built on executors in phase 1 so that phase 2 only produces bytes:
counts to the output topic, dead letters (with reason and source coordinates) to theirs."""

from __future__ import annotations

import base64
import json

import pyarrow as pa

from ..counting import KIND_COUNT
from .stage import STAGED_SCHEMA

# A dead letter keeps at most this much of the raw value, so it always fits in a Kafka record.
MAX_DEAD_LETTER_VALUE_BYTES = 65536


def output_records(batch: pa.RecordBatch, batch_id: int, output_topic: str, dead_letter_topic: str) -> pa.Table:
    topics: list[str] = []
    keys: list[bytes] = []
    values: list[bytes] = []
    columns = batch.to_pydict()
    for i, kind in enumerate(columns["kind"]):
        if kind == KIND_COUNT:
            key = columns["key"][i]
            topics.append(output_topic)
            keys.append(key.encode())
            values.append(json.dumps({"key": key, "count": columns["count"][i], "batch_id": batch_id}).encode())
        else:
            coordinates = (columns["source_topic"][i], columns["source_partition"][i], columns["source_offset"][i])
            raw = columns["raw_value"][i] or b""
            kept = raw[:MAX_DEAD_LETTER_VALUE_BYTES]
            topics.append(dead_letter_topic)
            keys.append("/".join(str(part) for part in coordinates).encode())
            values.append(json.dumps({
                "reason": columns["reason"][i],
                "source_topic": coordinates[0],
                "source_partition": coordinates[1],
                "source_offset": coordinates[2],
                "value_base64": base64.b64encode(kept).decode(),
                "value_truncated": len(kept) < len(raw),
                "batch_id": batch_id,
            }).encode())
    return pa.Table.from_pydict({"topic": topics, "key": keys, "value": values}, schema=STAGED_SCHEMA)
