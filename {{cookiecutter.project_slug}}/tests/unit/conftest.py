from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from {{ cookiecutter.package_name }}.spark.session import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark for the unit tests that run Spark expressions (no Kafka)."""
    session = spark_session("unit-tests", "local[1]", shuffle_partitions=2)
    yield session
    session.stop()
