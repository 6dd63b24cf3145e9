"""Routing (pipeline/query.py's `route`, `[routes]`): each answer on its route's topic, a batch's
records for all of them in the batch's transactions. Judged per topic by both oracles through
crashes on each side of the Kafka commit (tools' routing.py qualifies every key with its topic);
an answer whose route has no topic is a dead letter that says so; the at-least-once sink, routed
the same way, duplicates."""

from __future__ import annotations

import base64
import json
import signal
from collections import Counter

from {{ cookiecutter.package_name }}.sink import faults
from {{ cookiecutter.package_name }}_tools.readback import read_topic
from {{ cookiecutter.package_name }}_tools.routing import NO_TOPIC

from harness import PUBLISHED_BEFORE_THE_CRASH, SETTLE_SECONDS, crash_at_each_point, merged, produce_sample

# Over the key, which every query's output records have: three routes with a topic, and a fourth
# (null: out of the array's bounds) without one.
ROUTE = "try_element_at(array('first', 'second', 'third'), 1 + pmod(hash(key), 4))"
ROUTE_NAMES = ("first", "second", "third")


def routed(job, new_topic) -> dict[str, str]:
    """Route `job` to three new topics; returns route name -> topic."""
    topics = {name: new_topic(f"routed-{name}", partitions=2) for name in ROUTE_NAMES}
    job.options.update(route=ROUTE, **{f"routes.{name}": topic for name, topic in topics.items()})
    return topics


def qualifiers(published) -> Counter[str]:
    """How many keys each topic (or NO_TOPIC) holds answers of."""
    return Counter(key.split("|", 1)[0] for key in published.answers)


def test_routed_answers_reach_their_topics_exactly_once_through_crashes_around_the_kafka_commit(job, new_topic):
    """The driver SIGKILLed before and after the Kafka commit, phase 2 in tasks and on the
    driver: each topic holds exactly what the model routes there, batch by batch, and the same
    records as a run without faults."""
    topics = routed(job, new_topic)
    points = [(faults.BEFORE_KAFKA_COMMIT, "tasks"), (faults.AFTER_KAFKA_COMMIT, "driver")]
    verdict, crashes = crash_at_each_point(job, points, seed=29)
    for crash in crashes:
        assert crash.visible == (crash.fault in PUBLISHED_BEFORE_THE_CRASH), crash
    assert verdict.exactly_once, verdict.problems
    held = qualifiers(job.published())
    assert len(set(held) & set(topics.values())) >= 2, f"the route spread the answers over too few topics: {held}"


def test_an_answer_whose_route_has_no_topic_is_a_dead_letter_that_says_so(job, new_topic):
    """Every answer routed to a route `[routes]` lacks: none reaches a topic, each is a dead letter
    with its reason, its route and its value, exactly once (the model's answers, per batch)."""
    topics = routed(job, new_topic)
    job.options["route"] = "'nowhere'"
    sample = produce_sample(job, count=2000, seed=31, partitions=4)
    completed = job.run(max_offsets_per_trigger="1000")
    assert completed.returncode == 0, completed.stdout[-3000:]
    verdict = job.verify(*merged(sample))
    assert verdict.exactly_once, verdict.problems
    assert all(read_topic(job.bootstrap_servers, topic) == [] for topic in topics.values())
    assert set(qualifiers(job.published())) == {NO_TOPIC}
    letters = [json.loads(value or b"null") for _key, value in read_topic(job.bootstrap_servers, job.dead_letter_topic)]
    misrouted = [letter for letter in letters if "route" in letter]
    assert misrouted and {letter["reason"] for letter in misrouted} == {"route 'nowhere' is not in [routes]"}
    assert all(json.loads(base64.b64decode(letter["value_base64"]))["key"] == letter["key"] for letter in misrouted)


def test_the_same_crash_duplicates_routed_answers_with_the_at_least_once_sink(job, new_topic):
    """The counter-proof, routed: a crash after the produce, and the topics' answers come twice."""
    routed(job, new_topic)
    job.guarantee = "at-least-once"
    sample = produce_sample(job, count=3000, seed=37, partitions=4)
    crashed = job.run(fault=faults.AFTER_KAFKA_COMMIT, fault_batch=1, max_offsets_per_trigger="1000")
    assert crashed.returncode == -signal.SIGKILL, f"the fault did not kill the job:\n{crashed.stdout[-3000:]}"
    assert job.published(settle=SETTLE_SECONDS).batches(), "nothing was visible at the crash"
    recovered = job.run(max_offsets_per_trigger="1000")
    assert recovered.returncode == 0, recovered.stdout[-3000:]
    verdict = job.verify(*merged(sample))
    assert verdict.duplicated > 0, "the at-least-once sink published no duplicate: the check has no teeth"
    assert not verdict.exactly_once
