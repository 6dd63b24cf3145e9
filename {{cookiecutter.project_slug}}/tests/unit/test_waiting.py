"""The one way the job waits: poll asks until the answer is the one wanted or the time is up;
retry tries a call again on the failures it is told are worth it, and lets any other go up."""

from __future__ import annotations

import pytest

from {{ cookiecutter.package_name }}.waiting import poll, retry


def test_poll_asks_until_the_answer_is_the_one_wanted_or_the_time_is_up():
    answers = iter(range(10))
    assert poll(lambda: next(answers), lambda answer: answer == 3, timeout=60, pause=0.001) == 3
    asked = []
    assert poll(lambda: asked.append(1) or len(asked), lambda answer: False, timeout=0, pause=0.001) == 1


def test_retry_tries_again_what_is_worth_it_and_lets_the_rest_go_up():
    failures = [TimeoutError("once"), TimeoutError("twice")]
    told = []

    def attempt() -> str:
        if failures:
            raise failures.pop(0)
        return "done"

    retriable = lambda error: isinstance(error, TimeoutError)  # noqa: E731
    assert retry(attempt, retriable, timeout=60, pause=0.001, retrying=lambda: told.append(1)) == "done"
    assert told == [1, 1]
    with pytest.raises(ValueError, match="not worth it"):
        retry(lambda: (_ for _ in ()).throw(ValueError("not worth it")), retriable, timeout=60, pause=0.001)
    with pytest.raises(TimeoutError, match="always"):
        retry(lambda: (_ for _ in ()).throw(TimeoutError("always")), retriable, timeout=0, pause=0.001)
