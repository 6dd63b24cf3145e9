"""The output records, built on executors in phase 1 so that phase 2 only produces bytes:
counts to the output topic, dead letters (with reason and source coordinates) to theirs."""

from __future__ import annotations

import json

import pyarrow as pa

from ..counting import KIND_COUNT
from ..dead_letters import DEAD_LETTER_VALUE, with_batch_id
from .stage import STAGED_SCHEMA


def output_records(batch: pa.RecordBatch, batch_id: int, output_topic: str, dead_letter_topic: str) -> pa.Table:
    """Counts become `{"key", "count", "batch_id"}` on the output topic; dead letters arrive
    encoded (dead_letters.py) and get the batch id."""
    topics: list[str] = []
    keys: list[bytes] = []
    values: list[bytes] = []
    columns = batch.to_pydict()
    for kind, key, count, dead_letter in zip(
        columns["kind"], columns["key"], columns["count"], columns[DEAD_LETTER_VALUE], strict=True
    ):
        if kind == KIND_COUNT:
            topics.append(output_topic)
            values.append(json.dumps({"key": key, "count": count, "batch_id": batch_id}).encode())
        else:
            topics.append(dead_letter_topic)
            values.append(with_batch_id(dead_letter, batch_id).encode())
        keys.append(key.encode())
    return pa.Table.from_pydict({"topic": topics, "key": keys, "value": values}, schema=STAGED_SCHEMA)
