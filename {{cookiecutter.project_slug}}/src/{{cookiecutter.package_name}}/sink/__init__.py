"""The exactly-once Kafka sink, from outside: this face is all the rest of the job (and its tools)
may import; the modules beside it are its insides (tests/unit/test_layout.py holds that).

- the sink: KafkaSink (Spark's `foreachBatch` function), the guarantee AT_LEAST_ONCE names, and
  for_commit, which the query's plan applies so that no batch pays for it on the driver;
  BatchPublished, what it did for a batch (the runner's log lines);
- its settings: SinkSettings, built from the configuration by settings_for, and the prefix of
  its transactional ids (transactional_ids);
- its start-up check: check_start, before the first batch;
- its savepoint hand-off: published_batches, fence_stopped_job;
- its log, as `status` reads it: SinkLog;
- faults: the points of the commit protocol the crash tests fire.

Each name is loaded when first used, so that a command that needs one light name (`status`: the
sink log) does not load PySpark with the rest."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import faults
    from .coordinator import BatchPublished
    from .kafka_sink import AT_LEAST_ONCE, KafkaSink, for_commit
    from .savepoint_handoff import fence_stopped_job, published_batches
    from .settings import SinkSettings, settings_for, transactional_ids
    from .sink_log import SinkLog
    from .start_checks import check_start

# Each name of the face, and the module of the sink's that holds it.
_HELD_IN = {
    "AT_LEAST_ONCE": "kafka_sink", "KafkaSink": "kafka_sink", "for_commit": "kafka_sink",
    "BatchPublished": "coordinator",
    "SinkSettings": "settings", "settings_for": "settings", "transactional_ids": "settings",
    "check_start": "start_checks",
    "fence_stopped_job": "savepoint_handoff", "published_batches": "savepoint_handoff",
    "SinkLog": "sink_log",
    "faults": "faults",
}
__all__ = ["AT_LEAST_ONCE", "BatchPublished", "KafkaSink", "SinkLog", "SinkSettings", "check_start", "faults",
           "fence_stopped_job", "for_commit", "published_batches", "settings_for", "transactional_ids"]


def __getattr__(name: str) -> Any:
    if name not in _HELD_IN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{_HELD_IN[name]}", __name__)
    return module if name == _HELD_IN[name] else getattr(module, name)
