"""The query's steps around what the team decides (query.py): parsed events in, the changes the
sink publishes out. Dead letters pass the team's filter whatever it says, to reach their topic;
the filter is applied in place (pushed down, it would parse every record again:
unpushed_filter.py); then the shape's operator builds the changes. Nothing here is the team's to
edit: a change to what the job computes is a change to query.py."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..config import JobConfig
from . import query
{%- if cookiecutter.query == "count-by-key" %}
from .aggregates import Answer, checked
{%- endif %}
from .changes import Changes
{%- if cookiecutter.query == "count-by-key" %}
from .counting import aggregate_changes, columns_read
{%- endif %}
from .parsing import IS_EVENT
{%- if cookiecutter.query == "stateless" %}
from .projection import project_changes
{%- endif %}
from .unpushed_filter import where_in_place
{%- if cookiecutter.query == "windowed-count" %}
from .windowed_counting import windowed_changes
{%- endif %}


{%- if cookiecutter.query == "count-by-key" %}


def checked_answer(config: JobConfig) -> Answer:
    """query.answer, refused in one line where its state could not be kept (aggregates.checked):
    the start calls it before Spark runs, the query when it is built."""
    return checked(query.answer(config), config)
{%- endif %}


def kept(events: DataFrame, config: JobConfig) -> DataFrame:
    """The events query.keep keeps, and every dead letter.
{%- if cookiecutter.query == "count-by-key" %} Only the columns the count reads cross the
    filter's barrier (Spark cannot prune what a generator carries).{% endif %}"""
{%- if cookiecutter.query == "count-by-key" %}
    events = events.select(*(f"`{name}`" for name in columns_read(events.columns, config.state_ttl_seconds)))
{%- endif %}
    return where_in_place(events, ~F.col(IS_EVENT) | query.keep(config))


def changes(events: DataFrame, config: JobConfig, seed: DataFrame | None = None) -> Changes:
    """The whole query: parsed events in, changes out.
{%- if cookiecutter.query == "count-by-key" %} `seed`: a savepoint's state, or None
    (job.savepoint_seed)."""
    return aggregate_changes(kept(events, config), config.key_field, checked_answer(config),
                             config.state_ttl_seconds, seed)
{%- elif cookiecutter.query == "stateless" %} `seed`: unused (no state to start from)."""
    return project_changes(kept(events, config), config.key_field, query.project(config))
{%- else %} `seed`: unused (savepoints move counts per
    key, not per window: preflight refuses them for this query)."""
    return windowed_changes(kept(events, config), config.key_field, config.event_time_field,
                            config.window_seconds, config.allowed_lateness_seconds)
{%- endif %}
