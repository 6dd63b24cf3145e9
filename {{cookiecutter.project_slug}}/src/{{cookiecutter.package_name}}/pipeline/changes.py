"""What the count hands on: the columns both counting operators read (counting.py, and
ttl_counting.py for a state TTL) and the changes they emit, one row per key whose count changed,
or per dead letter. Its own module: the TTL operator imports it, not the module that chooses between the two."""

from __future__ import annotations

from .dead_letters import DEAD_LETTER_KEY, DEAD_LETTER_VALUE

KIND_COUNT = "count"
KIND_DEAD_LETTER = "dead_letter"
# A change that says: this input partition (the key) had dead letters in this batch.
KIND_DEAD_LETTERS_IN_PARTITION = "dead_letters_in_partition"
GROUP_KEY = "group_key"
# A dead letter's group (null for a good event): the input partition it came from. Its count of
# dead letters so far is the only state dead letters keep: a row per input partition.
DEAD_LETTER_GROUP = "dead_letter_group"
GROUPING = [GROUP_KEY, DEAD_LETTER_GROUP]
# Per record: the key of a good event, or a dead letter's group, Kafka key and value; the others null.
INPUT_COLUMNS = [GROUP_KEY, DEAD_LETTER_GROUP, DEAD_LETTER_KEY, DEAD_LETTER_VALUE]
# Per change: a count (kind, key, count) or a dead letter (kind, key, dead_letter_value).
CHANGES_SCHEMA = "kind STRING, key STRING, count BIGINT, dead_letter_value STRING"
