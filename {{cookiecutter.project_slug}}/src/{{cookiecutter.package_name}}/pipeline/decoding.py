"""The input's values to parsed events or dead letters, in the format the query's plan says:
JSON (parsing.py), or Avro or Protobuf in the registry's wire format (avro_parsing.py,
protobuf_parsing.py). All give the same columns, so that nothing after the parse knows the format."""

from __future__ import annotations

from pyspark.sql import DataFrame

from .parsing import EventSchema, parse_records


def decode(records: DataFrame, schema: EventSchema) -> DataFrame:
    """Kafka records (the source's columns) to parsed events, or dead letters with a reason."""
    if schema.plan is None:
        return parse_records(records, schema)
    from ..formats.avro_input import AvroInput

    if isinstance(schema.plan, AvroInput):
        from .avro_parsing import parse_avro

        return parse_avro(records, schema, schema.plan)
    from .protobuf_parsing import parse_protobuf

    return parse_protobuf(records, schema, schema.plan)
