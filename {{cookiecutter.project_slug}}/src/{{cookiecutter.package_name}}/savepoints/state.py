"""Every key's state, read from the checkpoint with Spark's state data source: what a savepoint
keeps and `state` shows."""

from __future__ import annotations
{% if cookiecutter.query == "count-by-key" %}
import time
{% endif %}
from ..config import JobConfig
{%- if cookiecutter.query == "count-by-key" %}
from ..storage.files import resolve_location
{%- endif %}
from .manifest import SavepointError
{%- if cookiecutter.query == "count-by-key" %}
from .origin import read_origin
{%- endif %}


{% if cookiecutter.query == "count-by-key" -%}
def read_state(spark, config: JobConfig, batch_id: int):
    """Every key's state after `batch_id`, from the checkpoint (Spark's state data source), as a
    DataFrame (state_schema). The dead letters' per-partition counts are left out, and with a
    state TTL the keys already expired. A state of other columns than the answer declares (its
    code changed under the checkpoint) is refused in one line."""
    from pyspark.sql import functions as F

    from ..pipeline.changes import EVENTS_AFTER_SEED, GROUP_KEY
    from ..pipeline.steps import checked_answer

    spark.streams  # noqa: B018 - starts the StateStoreCoordinator, which reading a RocksDB store needs
    answer = checked_answer(config)
    location = resolve_location(config.checkpoint_location)
    reader = spark.read.format("statestore").option("batchId", batch_id)
    key = F.col(f"key.{GROUP_KEY}")
    # The checkpoint's operator decides, not the configuration (which may have changed since).
    operators = {row.operatorName for row in spark.read.format("state-metadata").load(location).collect()}
    if any(name.startswith("transformWithState") for name in operators):  # ttl_counting.py's value state
        from ..pipeline.ttl_counting import STATE_VARIABLE

        state = reader.option("stateVarName", STATE_VARIABLE).load(location)
        value = state.schema["value"].dataType["value"].dataType
        values, expiry = F.col("value.value"), F.col("value.ttlExpirationMs")
        state = state.where(key.isNotNull() & (expiry > int(time.time() * 1000)))
        extra: list[str] = []
    else:
        # Spark's aggregation keeps each state column's buffer (named after its function, not the
        # column), in the answer's order (counting.py); after a savepoint's seed, the count of
        # events since last.
        state = reader.load(location)
        value = state.schema["value"].dataType
        values, expiry = F.col("value"), F.lit(None)
        state = state.where(key.isNotNull())
        extra = [EVENTS_AFTER_SEED] if read_origin(config) is not None else []
    declared = [(column.name, column.type) for column in answer.state] + [(name, "BIGINT") for name in extra]
    found = [field.dataType.simpleString().upper() for field in value.fields]
    if found != [kind for _, kind in declared]:
        raise SavepointError("checkpoint_location", f"{location} keeps each key's state as ({', '.join(found)}) and "
                             f"pipeline/query.py's answer as ({answer.state_ddl()}): the answer changed under its "
                             "checkpoint")
    named = "struct<" + ", ".join(f"`{name}`: {kind}" for name, kind in declared) + ">"  # a cast renames by position
    renamed = state.select(key.alias("key"), values.cast(named).alias("value"),
                           expiry.cast("bigint").alias("expires_at_ms"))
    return renamed.select("key", *(F.col(f"value.`{column.name}`") for column in answer.state), "expires_at_ms")

{%- else -%}
def read_state(spark, config: JobConfig, batch_id: int):
    """This query keeps no answer per key to read."""
    raise SavepointError("savepoint", "this query keeps no answer per key for a savepoint or `state` to read")
{%- endif %}
