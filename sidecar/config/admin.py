"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs compute for topics,
as a Kafka 3.9 broker answers them (checked with tools/kafka_reference/): each topic
config with its value, source, synonyms, type and documentation, and the new override
set an alteration asks for, validated with Kafka's error codes and messages.

The storage side (the compare-and-set of the topic's registry entry) is in
storage/topic_admin.py; the broker configs are in config/broker.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sidecar.config import storage_format
from sidecar.config.docs import TOPIC_DOCS, TOPIC_ORDER
from sidecar.config.topic import KEYS, ConfigError, ConfigKey
from sidecar.protocol import errors
from sidecar.validation import topic_configs

# ConfigSource ids (DescribeConfigsResponse)
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# ConfigType ids (DescribeConfigs v3+)
CONFIG_TYPES = {
    "boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
    "class": 8, "password": 9,
}  # fmt: skip
# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# Broker synonyms Kafka has no default for (log.retention.ms and friends fall back to
# their *.hours / *.minutes forms), so Kafka lists no synonym for these topic configs
# unless a server setting names the value.
NO_BROKER_DEFAULT = {"retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"}
HOURS_DEFAULT = {
    "retention.ms": {"name": "log.retention.hours", "value": "168", "source": DEFAULT_CONFIG}
}

NOT_APPLIED_NOTE = (
    " (Skiff: accepted, stored and reported like Kafka, but not applied: Redis Streams "
    "have no segments, flushes or replicas of their own.)"
)
# Kafka 4.4's configs Skiff has no machinery for yet.
NOT_YET_NOTE = " (Skiff: accepted, stored and reported like Kafka, but not applied yet.)"
NOT_YET = {
    "remote.copy.lag.ms",
    "remote.copy.lag.bytes",
    "max.decompressed.message.bytes",
    "errors.deadletterqueue.group.enable",
}


class AdminError(Exception):
    """A refused resource: the Kafka error code and message to answer with."""

    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message or "")
        self.code = code
        self.message = message


def documentation(key: ConfigKey) -> str:
    doc = TOPIC_DOCS.get(key.name, "")
    if key.applies:
        return doc
    return doc + (NOT_YET_NOTE if key.name in NOT_YET else NOT_APPLIED_NOTE)


def _shown(key: ConfigKey, raw: str) -> str:
    """An override as Kafka shows it: parsed and printed again ("a, b" -> "a,b")."""
    try:
        return key.format(key.parse(raw))
    except ConfigError:
        return raw  # written by hand into Redis: show it as it is


# A topic config's broker synonyms (config/broker.py topic_synonyms: the dynamic broker
# configs, the flag, Kafka's default), as its entry lists them after its own override.
BrokerSynonyms = Callable[[ConfigKey], list[dict[str, Any]]]


def topic_entry(
    key: ConfigKey,
    overrides: Mapping[str, str],
    defaults: Mapping[str, Any],
    include_synonyms: bool,
    include_documentation: bool,
    broker_synonyms: BrokerSynonyms | None = None,
) -> dict[str, Any]:
    """One DescribeConfigs entry of a topic config (Kafka's createTopicConfigEntry).
    Without `broker_synonyms`, the broker synonyms are the static ones of `defaults`."""
    synonyms: list[dict[str, Any]] = []
    if key.name in overrides:
        value = _shown(key, overrides[key.name])
        synonyms.append({"name": key.name, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
    server = defaults.get(key.name, key.default)
    if broker_synonyms is not None:
        synonyms += broker_synonyms(key)
    elif key.synonym is not None:
        if server != key.default:
            synonyms.append(
                {"name": key.synonym, "value": key.format(server), "source": STATIC_BROKER_CONFIG}
            )
            if key.name in HOURS_DEFAULT:  # Kafka 4 then lists the *.hours form's default
                synonyms.append(HOURS_DEFAULT[key.name])
        if key.name not in NO_BROKER_DEFAULT:
            synonyms.append(
                {"name": key.synonym, "value": key.format(key.default), "source": DEFAULT_CONFIG}
            )
    value = synonyms[0]["value"] if key.name in overrides else key.format(server)
    return {
        "name": key.name,
        "value": value,
        "read_only": False,
        "config_source": synonyms[0]["source"] if synonyms else DEFAULT_CONFIG,
        "is_sensitive": False,
        "synonyms": synonyms if include_synonyms else [],
        "config_type": CONFIG_TYPES[key.kind],
        "documentation": documentation(key) if include_documentation else None,
    }


def describe_topic(
    overrides: Mapping[str, str],
    defaults: Mapping[str, Any],
    names: Iterable[str] | None,
    include_synonyms: bool,
    include_documentation: bool,
    fmt: tuple[str, bool] | None = None,
    broker_synonyms: BrokerSynonyms | None = None,
) -> list[dict[str, Any]]:
    """Every topic config (or those named in `names`; unknown names are left out, as
    Kafka does), in the order a Kafka broker lists them; then, given the topic's
    (storage format, named at creation), Skiff's skiff.storage.format."""
    wanted = set(names) if names else None
    entries = [
        topic_entry(
            KEYS[n], overrides, defaults, include_synonyms, include_documentation, broker_synonyms
        )
        for n in TOPIC_ORDER
        if wanted is None or n in wanted
    ]
    if fmt is not None and (wanted is None or storage_format.CONFIG in wanted):
        entries.append(storage_format.config_entry(*fmt, include_synonyms, include_documentation))
    return entries


# -- alterations ------------------------------------------------------------------------------


def check_duplicates_and_nulls(
    pairs: list[tuple[str, str | None]], null_ok: set[str], separator: str = ","
) -> None:
    """What Kafka checks before looking at the resource: a name given twice, and a null
    value (except where the operation takes none). Kafka lists a topic's null names
    joined by ",", a broker's by ", "."""
    names = [n for n, _ in pairs]
    if len(set(names)) != len(names):
        raise AdminError(errors.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [n for n, v in pairs if v is None and n not in null_ok]
    if nulls:
        raise AdminError(
            errors.INVALID_REQUEST, "Null value not supported for : " + separator.join(nulls)
        )


def _validated(
    overrides: dict[str, str],
    defaults: Mapping[str, Any] | None,
    remote_storage: bool,
    previous: dict[str, str],
) -> dict[str, str]:
    try:
        return topic_configs.validate(overrides.items(), defaults, remote_storage, previous)
    except ConfigError as exc:
        raise AdminError(errors.INVALID_CONFIG, str(exc)) from None


def _refuse_storage_format(names: Iterable[str]) -> None:
    """A topic's storage format is fixed at creation (config/storage_format.py)."""
    if storage_format.CONFIG in names:
        raise AdminError(errors.INVALID_CONFIG, storage_format.ALTER_REFUSED)


def legacy_alter(
    configs: list[tuple[str, str | None]],
    defaults: Mapping[str, Any] | None = None,
    remote_storage: bool = False,
) -> Any:
    """AlterConfigs: the given set replaces every override (a name left out is removed).
    Returns change(current overrides) -> new overrides, for topic_admin.alter_configs."""
    check_duplicates_and_nulls(configs, set())
    _refuse_storage_format(n for n, _ in configs)
    wanted = {n: v for n, v in configs if v is not None}

    def change(current: dict[str, str]) -> dict[str, str]:
        return _validated(dict(wanted), defaults, remote_storage, current)

    return change


def incremental_alter(
    ops: list[tuple[str, int, str | None]],
    defaults: Mapping[str, Any],
    remote_storage: bool = False,
) -> Any:
    """IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on the current
    overrides (APPEND/SUBTRACT start from the server default when there is no override,
    and only on LIST configs, as Kafka's ConfigurationControlManager does)."""
    for _, op, _ in ops:
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise AdminError(errors.UNKNOWN_SERVER_ERROR, None)  # what Kafka 3.9 answers
    check_duplicates_and_nulls([(n, v) for n, _, v in ops], {n for n, op, _ in ops if op == DELETE})
    _refuse_storage_format(n for n, _, _ in ops)
    for name, op, _ in ops:
        if op in OP_NAMES and (name not in KEYS or KEYS[name].kind != "list"):
            raise AdminError(
                errors.INVALID_CONFIG,
                f"Can't {OP_NAMES[op]} to key {name} because its type is not LIST.",
            )

    def change(current: dict[str, str]) -> dict[str, str]:
        new = dict(current)
        for name, op, value in ops:
            if op == SET:
                new[name] = value or ""
            elif op == DELETE:
                new.pop(name, None)
            else:
                old = new.get(name)
                if old is None:
                    key = KEYS[name]
                    old = key.format(defaults.get(name, key.default))
                parts = [p for p in old.split(",") if p]
                for item in (value or "").split(","):
                    if op == APPEND and item not in parts:
                        parts.append(item)
                    elif op == SUBTRACT and item in parts:
                        parts.remove(item)
                new[name] = ",".join(parts)
        return _validated(new, defaults, remote_storage, current)

    return change
