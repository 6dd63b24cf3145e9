"""The job's output as Kafka records, built in the JVM as part of the streaming query:
- a key's answer becomes `{"key": ..., "count": ...}` (query.answer's names) on the output
  topic, keyed by its key; or, routed (query.route), on its route's topic in `[routes]`: an answer
  whose route is not there (or null) is a dead letter that says so, never a topic created on the
  fly;
- a dead letter keeps its JSON value (dead_letters.py) and goes to the dead-letter topic, keyed
  by its source coordinates;
- "partition P had dead letters" becomes a *read-back request*, a record without a topic whose key is
  P, which the sink turns into the dead letters themselves by reading them back
  (dead_letter_readback.py).
An answer's value is JSON, or Avro or Protobuf in the registry's wire format (formats/avro_output.py,
protobuf_output.py).
Each value is without the batch id: the sink stamps every record with it as it
produces (`"batch_id": N` as the value's last field, and a `batch_id` header:
sink/batch_records.with_batch_id), so that a batch costs the driver no plan of its own. Every
DataFrame call the driver makes per batch is a py4j round trip and an analysis of the new plan,
on every batch's path to its output: all of it is done here, once per query."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .changes import KIND_ANSWER, KIND_DEAD_LETTERS_IN_PARTITION, answer_names
from .dead_letters import DEAD_LETTER_VALUE
from .parsing import HEADERS

ROUTE = "_route"  # query.route's value for each change: a name of [routes], or not

if TYPE_CHECKING:
    from ..formats.avro_output import AvroOutput
    from ..formats.protobuf_output import ProtobufOutput


def encode(changes: DataFrame, output_topic: str, dead_letter_topic: str,
           output: AvroOutput | ProtobufOutput | None = None,
           route: Column | None = None, routes: Mapping[str, str] | None = None) -> DataFrame:
    """Changes (changes.CHANGES_SCHEMA) to `topic STRING, key BINARY, value BINARY`, each value
    without the batch id: an answer's a JSON object, or with `output` an Avro or Protobuf record; a dead letter's a
    JSON object; a read-back request has a null topic and value. `route`: an answer's route over
    its fields, a name of `routes` (route name: topic); None: the output topic. Changes with the input's headers
    keep them, as Spark's Kafka sink names them (`headers`). A row without a key (the TTL
    operator's dead-letter group) is dropped."""
    is_answer = F.col("kind") == KIND_ANSWER
    is_read_back = F.col("kind") == KIND_DEAD_LETTERS_IN_PARTITION
    if output is None:
        answer_value = F.to_json(answer(changes)).cast("binary")
    else:
        from ..formats import avro_output, protobuf_output

        if isinstance(output, avro_output.AvroOutput):
            answer_value = avro_output.encode(answer(changes), output)
        else:
            answer_value = protobuf_output.encode(answer(changes), output)
    topic = F.when(is_answer, F.lit(output_topic))
    value = F.when(is_answer, answer_value)
    if route is not None:
        table = F.create_map(*(F.lit(part) for pair in sorted((routes or {}).items()) for part in pair))
        changes = changes.select("*", route.cast("string").alias(ROUTE))
        routed_to = F.try_element_at(table, F.col(ROUTE))
        misrouted = is_answer & routed_to.isNull()
        topic = F.when(misrouted, F.lit(dead_letter_topic)).when(is_answer, routed_to)
        value = F.when(misrouted, _misrouted_value(F.col(ROUTE), answer_value)).when(is_answer, answer_value)
    return changes.select(
        topic.when(~is_read_back, F.lit(dead_letter_topic)).alias("topic"),
        F.col("key").cast("binary").alias("key"),
        value.otherwise(F.col(DEAD_LETTER_VALUE).cast("binary")).alias("value"),
        *_headers(changes),
    ).where(F.col("key").isNotNull())


def checked_route(changes: DataFrame, route: Callable[[], Column | None]) -> Column | None:
    """query.route's column, analysed over an output record's fields (`key`, the answer's names)
    without running anything: one that does not parse or analyse fails the start, naming the option."""
    from pyspark.errors import PySparkException

    from ..failures import ConfigError

    fields = ["key", *answer_names(changes.columns)]
    try:
        column = route()
        if column is not None:
            changes.select(*fields).select(column).schema  # noqa: B018 - forces analysis
    except PySparkException as error:
        first_line = str(error).strip().splitlines()[0]
        raise ConfigError("route", f"not a Spark SQL expression over an output record's fields "
                                   f"({', '.join(fields)}): {first_line}") from None
    return column


def _misrouted_value(route: Column, value: Column) -> Column:
    """A dead letter for an answer whose route has no topic in `[routes]`: why, the route, and
    the answer's value in base64 (as an input dead letter keeps its raw value)."""
    named = F.when(route.isNull(), F.lit("no route (null)")).otherwise(F.format_string("route '%s'", route))
    return F.to_json(F.struct(
        F.format_string("%s is not in [routes]", named).alias("reason"),
        route.alias("route"),
        F.col("key").alias("key"),
        F.base64(value).alias("value_base64"),
    ), {"ignoreNullFields": "false"}).cast("binary")  # a null route is said, not left out


def answer(changes: DataFrame) -> Column:
    """A key's answer as one struct: the key, then the answer's columns (query.answer's names)."""
    return F.struct(F.col("key"), *answer_names(changes.columns))


def answer_type(changes: DataFrame) -> T.StructType:
    """The Spark type of `answer`, which an Avro output's schema must fit (formats/avro_output.py)."""
    data_type = changes.select(answer(changes).alias("answer")).schema["answer"].dataType
    assert isinstance(data_type, T.StructType)
    return data_type


def _headers(changes: DataFrame) -> list[Column]:
    """The input's headers where the changes keep them, none as an empty list, not null (Spark's
    Kafka source gives a record without headers a null list): Spark hands a null nested list to
    Python several times slower than an empty one, which the sink's publishing tasks would pay on
    every batch (phase 1 and phase 2 per batch: the batch lines of the bench in a stateless
    rendering)."""
    if HEADERS not in changes.columns:
        return []
    return [F.coalesce(F.col(HEADERS), F.array().cast(changes.schema[HEADERS].dataType)).alias(HEADERS)]

