"""What the query hands the sink: the changes it emits, one row per key whose answer changed (or
per record, for an append output), or per dead letter, and the columns its operators read. Its
own module: each operator imports it, not the module that chooses between them."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

from ..failures import AnswerNameClash
from .dead_letters import DEAD_LETTER_VALUE
from .parsing import HEADERS

KIND_ANSWER = "answer"
KIND_DEAD_LETTER = "dead_letter"
# A change that says: this input partition (the key) had dead letters in this batch.
KIND_DEAD_LETTERS_IN_PARTITION = "dead_letters_in_partition"
GROUP_KEY = "group_key"
# A dead letter's group (null for a good event): the input partition it came from. Its count of
# dead letters so far is the only state dead letters keep: a row per input partition.
DEAD_LETTER_GROUP = "dead_letter_group"
GROUPING = [GROUP_KEY, DEAD_LETTER_GROUP]
# In a checkpoint started from a savepoint: how many events a key had since (its seed is not one).
EVENTS_AFTER_SEED = "events_after_seed"
# Per change: kind, key, the answer's columns (query.answer's names), dead_letter_value, and the
# input record's headers where the query keeps them (parsing.HEADERS). A key's answer fills the
# answer's columns, a dead letter its value.
CHANGE_COLUMNS = ("kind", "key", DEAD_LETTER_VALUE, HEADERS)


@dataclass(frozen=True)
class Changes:
    frame: DataFrame
    output_mode: str  # what the operator needs of the streaming writer
    dead_letters_inline: bool  # False: the sink reads them back (KIND_DEAD_LETTERS_IN_PARTITION)


def answer_names(changes_columns: list[str]) -> list[str]:
    """The columns of a change that hold a key's answer."""
    return [name for name in changes_columns if name not in CHANGE_COLUMNS]


def checked_answer_names(names: list[str]) -> list[str]:
    """The answer's column names (query.py's), refused where one is a column the changes carry
    besides it or two are alike: Spark compares names without case, so "Key" is "key"."""
    reserved = {name.lower() for name in (*CHANGE_COLUMNS, *GROUPING, EVENTS_AFTER_SEED)}
    folded = [name.lower() for name in names]
    for name, lower in zip(names, folded, strict=True):
        if lower in reserved:
            raise AnswerNameClash(f"pipeline/query.py: the answer's column {name!r} is a name the sink's changes "
                                  f"use ({', '.join(sorted(reserved))}): name it otherwise")
        if folded.count(lower) > 1:
            raise AnswerNameClash(f"pipeline/query.py: two of the answer's columns are named {name!r} "
                                  "(Spark compares names without case): name them apart")
    return names
