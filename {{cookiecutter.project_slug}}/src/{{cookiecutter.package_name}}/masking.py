"""The secret client settings (passwords, JAAS lines, keys in `[kafka]`, `[s3]`, `[spark]`,
`[schema_registry]`), and what the logs and the `config` command show of them: ***."""

from __future__ import annotations

import dataclasses
from typing import Any

from .config import TABLE_OPTIONS, JobConfig

_SECRET_WORDS = ("password", "secret", "jaas", "token", "key.pem", "credentials", "user.info")


def is_secret(name: str) -> bool:
    return any(word in name.lower() for word in _SECRET_WORDS)


def secret_values(config: JobConfig) -> list[str]:
    """The values of the secret client settings, which the logs mask (logs.configure)."""
    return [value for table in TABLE_OPTIONS for name, value in getattr(config, table).items()
            if is_secret(name)]


def masked(config: JobConfig) -> dict[str, Any]:
    """The configuration as printable data: secrets of the client settings replaced by ***."""
    data = dataclasses.asdict(config)
    for table in TABLE_OPTIONS:
        data[table] = {name: "***" if is_secret(name) else value for name, value in getattr(config, table).items()}
    return data
