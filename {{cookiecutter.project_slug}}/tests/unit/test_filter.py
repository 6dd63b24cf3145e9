"""The filter is Spark SQL, checked by Spark's analyzer against the event schema at start-up
(preflight.check_filter): the template's answer here, and errors that name the column or token."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.config import ConfigError, JobConfig
from {{ cookiecutter.package_name }}.startup.preflight import check_filter


def test_the_configured_filter_is_valid_for_the_configured_schema(spark) -> None:
    check_filter(spark, JobConfig())  # the template's answer: a typo fails `make test` here, by name


@pytest.mark.parametrize(
    "expression",
    [
        "CAST(`{{ cookiecutter.key_field }}` AS INT) > 3",
        "CASE WHEN `{{ cookiecutter.key_field }}` = 'a' THEN true ELSE `{{ cookiecutter.key_field }}` ILIKE 'b%' END",
        "split(`{{ cookiecutter.key_field }}`, '-')[0] = 'dark'",
        "`{{ cookiecutter.key_field }}` IN ('a;b', 'c--d')",
    ],
)
def test_spark_sql_beyond_simple_comparisons_is_accepted(spark, expression: str) -> None:
    check_filter(spark, JobConfig(filter=expression))


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("no_such_column = 1", "no_such_column"),
        ("offset > 10", "offset"),  # the source's columns are not the event's
        ("dead_letter_reason IS NULL", "dead_letter_reason"),
        ("`{{ cookiecutter.key_field }}` !=! 'x'", "'!'"),
        ("`{{ cookiecutter.key_field }}` = 'unclosed", "'unclosed"),
        ("length(`{{ cookiecutter.key_field }}`, 2) > 1", "length"),
    ],
)
def test_a_bad_filter_fails_naming_the_option_and_the_culprit(spark, expression: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_filter(spark, JobConfig(filter=expression))
    message = str(caught.value)
    assert caught.value.option == "filter" and named in message, message
