"""The schema registry as the job uses it, on the driver only: Confluent's REST API (Confluent
Schema Registry, Apicurio Registry's `/apis/ccompat/v7`, Karapace) through confluent-kafka's
client. Asked when a query is built: the input subject's versions, the ids a re-run batch holds,
the answers' schema. A registry that does not answer is waited for within
schema_registry_tolerance_seconds; a schema id's text never changes, so an id is asked once per
build."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ..failures import ConfigError, FailureVerdict, SchemaRegistryUnreachable
from ..waiting import Tolerance

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

T = TypeVar("T")

# HTTP statuses that say the registry is in the way for now, not that the request is wrong.
_TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Subject:
    """A subject's versions: each version's schema id and schema text, and the latest's id."""

    name: str
    writers: dict[int, str]
    latest: int


class Registry:
    """One registry, as the `schema_registry` settings reach it."""

    def __init__(self, settings: Mapping[str, str], tolerance_seconds: float,
                 stop: threading.Event | None = None) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.url = settings.get("url", "")
        try:
            self.client: SchemaRegistryClient = SchemaRegistryClient(dict(settings))
        except (ValueError, TypeError) as error:  # an unknown or malformed setting
            raise ConfigError("schema_registry", str(error)) from None
        self.tolerance_seconds = tolerance_seconds
        self.stop = stop
        self._schemas: dict[int, str | None] = {}  # an id's schema text; None: the registry does not know it

    def subject(self, name: str, option: str, schema_type: str = "AVRO") -> Subject:
        """Every version of `name`, each of `schema_type` (AVRO, PROTOBUF); a subject the registry
        does not have fails the start, naming `option`."""
        versions = self._call(f"reading subject {name!r}", lambda: self._versions(name, option))
        writers: dict[int, str] = {}
        latest = -1
        for version in versions:
            schema_id, kind, text = self._call(f"reading subject {name!r} version {version}",
                                               functools.partial(self._version, name, version))
            if (kind or "AVRO") != schema_type:
                raise ConfigError(option, f"subject {name!r} version {version} is {kind or 'AVRO'}, not {schema_type}")
            writers[schema_id] = self._schemas[schema_id] = text
            latest = schema_id
        return Subject(name, writers, latest)

    def schema(self, schema_id: int) -> str | None:
        """The schema with this id, whatever its subject; None if the registry knows no such id."""
        if schema_id not in self._schemas:
            self._schemas[schema_id] = self._call(f"looking up schema id {schema_id}", lambda: self._schema(schema_id))
        return self._schemas[schema_id]

    def register(self, subject: str, schema_text: str, option: str, schema_type: str = "AVRO") -> int:
        """Register `schema_text` under `subject` (the id it already has, if it has one)."""
        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        def attempt() -> int:
            try:
                return self.client.register_schema(subject, Schema(schema_text, schema_type))
            except SchemaRegistryError as error:
                if error.http_status_code == 409:
                    raise ConfigError(option, f"the registry at {self.url} refuses it under subject {subject!r}: "
                                              f"{error.error_message} (incompatible with the versions there)") from None
                if error.http_status_code == 422:
                    raise ConfigError(option, f"the registry at {self.url} calls it invalid: "
                                              f"{error.error_message}") from None
                raise

        return self._call(f"registering subject {subject!r}", attempt)

    def existing(self, subject: str, schema_text: str, schema_type: str = "AVRO") -> int:
        """The id `schema_text` has under `subject`; a schema not registered there fails the start
        (output_schema_registration = "existing" asked for it)."""
        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        def attempt() -> int:
            try:
                schema_id = self.client.lookup_schema(subject, Schema(schema_text, schema_type)).schema_id
            except SchemaRegistryError as error:
                if error.http_status_code == 404:
                    raise ConfigError("output_schema_registration",
                                      f"the schema is not registered under subject {subject!r} at {self.url}: "
                                      "register it, or set output_schema_registration = \"register\"") from None
                raise
            if schema_id is None:
                raise ConfigError("schema_registry", f"{self.url} gave subject {subject!r}'s schema without its id")
            return schema_id

        return self._call(f"looking up subject {subject!r}", attempt)

    def _version(self, name: str, version: int) -> tuple[int, str | None, str]:
        """A version's schema id, type (None: Avro) and text."""
        registered = self.client.get_version(name, version)
        if registered.schema_id is None or registered.schema.schema_str is None:
            raise ConfigError("schema_registry", f"{self.url} gave subject {name!r} version {version} without its "
                                                 "id or schema")
        return registered.schema_id, registered.schema.schema_type, registered.schema.schema_str

    def _versions(self, name: str, option: str) -> list[int]:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return self.client.get_versions(name)
        except SchemaRegistryError as error:
            if error.http_status_code == 404:
                raise ConfigError(option, f"the registry at {self.url} has no subject {name!r}") from None
            raise

    def _schema(self, schema_id: int) -> str | None:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return self.client.get_schema(schema_id).schema_str
        except SchemaRegistryError as error:
            if error.http_status_code == 404:
                return None
            raise

    def _call(self, what: str, attempt: Callable[[], T]) -> T:
        """`attempt()`, with the registry's transient failures waited out within the tolerance."""
        tolerance = Tolerance(f"{what} at {self.url}", self.tolerance_seconds, self.stop,
                              event_kind="schema_registry_unreachable")

        def past(judged: FailureVerdict, waited: float) -> BaseException:
            return ConfigError("schema_registry.url", f"{self.url} did not answer for {waited:.0f}s "
                                                      f"(schema_registry_tolerance_seconds) while {what}: "
                                                      f"{judged.message}")

        return tolerance.run(lambda: _judged(attempt, self.url), past, retry_pause=1.0)


def _judged(attempt: Callable[[], T], url: str) -> T:
    """`attempt()`, its failures as the job's: a registry in the way for now is
    SchemaRegistryUnreachable (waited out), a refusal of the credentials names them."""
    from confluent_kafka.schema_registry.common._httpx_compat import httpx
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    try:
        return attempt()
    except SchemaRegistryError as error:
        if error.http_status_code in _TRANSIENT_STATUSES:
            raise SchemaRegistryUnreachable(f"HTTP {error.http_status_code}: {error.error_message}") from None
        if error.http_status_code in (401, 403):
            raise ConfigError("schema_registry.basic.auth.user.info",
                              f"{url} refused the credentials (HTTP {error.http_status_code})") from None
        raise ConfigError("schema_registry", f"{url}: HTTP {error.http_status_code}: {error.error_message}") from None
    except (httpx.TransportError, OSError) as error:
        raise SchemaRegistryUnreachable(f"{type(error).__name__}: {error}") from None
