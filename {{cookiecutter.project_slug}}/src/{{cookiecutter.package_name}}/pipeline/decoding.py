"""The input's values to parsed events or dead letters, in the format the query's plan says:
JSON (parsing.py), or Avro in the registry's wire format (avro_parsing.py). Both give the
same columns, so that nothing after the parse knows the format."""

from __future__ import annotations

from pyspark.sql import DataFrame

from .parsing import EventSchema, parse_records


def decode(records: DataFrame, schema: EventSchema) -> DataFrame:
    """Kafka records (the source's columns) to parsed events, or dead letters with a reason."""
    if schema.avro is None:
        return parse_records(records, schema)
    from .avro_parsing import parse_avro

    return parse_avro(records, schema, schema.avro)
