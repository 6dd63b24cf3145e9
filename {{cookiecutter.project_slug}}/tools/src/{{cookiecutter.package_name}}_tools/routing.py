"""The job's routing as the proof reads it: a routing job (`route` and `[routes]` set) publishes
each answer to its route's topic, or, when the route has none, as a dead letter that says so. The
oracles judge each topic apart by qualifying every key with its topic (`<topic>|<key>`), in what
they read (readback.py) and in what the query's model says (routed_model), the route evaluated
by Spark SQL over each answer, apart from the job, as the filter is."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Answer = dict[str, object]
Event = Mapping[str, object]
Model = Callable[[Iterable[Event]], Iterator[tuple[str, Answer]]]
# Each answer's route name (None: null), from the `route` expression and the answers.
RouteOf = Callable[[str, list[Answer]], list[str | None]]
# Where an answer whose route has no topic goes: the dead-letter topic, under this qualifier.
NO_TOPIC = "(no topic)"


def qualified(topic: str, key: str) -> str:
    return f"{topic}|{key}"


def routed_model(model: Model, route: str, routes: Mapping[str, str], route_of: RouteOf) -> Model:
    """`model` with each key qualified by its answer's topic (NO_TOPIC where the route has none)."""

    def routed(events: Iterable[Event]) -> Iterator[tuple[str, Answer]]:
        outputs = list(model(events))
        names = route_of(route, [answer for _key, answer in outputs])
        for (key, answer), name in zip(outputs, names, strict=True):
            yield qualified(routes.get(name, NO_TOPIC) if name is not None else NO_TOPIC, key), answer

    return routed


def spark_route(spark: SparkSession) -> RouteOf:
    """The route's names, evaluated by Spark SQL in a batch query over the answers as JSON gives
    them (types inferred from their values): the expression's own semantics, none of the job's."""

    def route_of(route: str, answers: list[Answer]) -> list[str | None]:
        if not answers:
            return []
        lines = [json.dumps({**answer, "_position": position}) for position, answer in enumerate(answers)]
        frame = spark.read.json(spark.sparkContext.parallelize(lines, 1))
        rows = frame.selectExpr("_position", f"CAST(({route}) AS STRING) AS route").collect()
        named: dict[int, str | None] = {row["_position"]: row["route"] for row in rows}
        return [named.get(position) for position in range(len(answers))]

    return route_of
