"""Topic configs: Kafka 4.4's topic config names, types, defaults and validation, the
server-wide defaults Skiff's flags set, and each topic's effective config.

A topic stores only its overrides, as the strings it was given (`configs` in its
`skiff:topics` entry, as Kafka keeps them); the store parses them once into
`TopicInfo.config`, the effective config (overrides over server defaults), so hot paths
read a config with one dict lookup: `effective_config(info, "max.message.bytes")`.

Every Kafka 4.4 topic config is known and validated as Kafka's ConfigDef does (same
types, ranges and messages); the ones Skiff does not apply (flush.ms, …) are accepted
and stored. `KEYS[name].applies` says which ones Skiff enforces. The configs Kafka 4
removed (message.format.version, message.downconversion.enable,
message.timestamp.difference.max.ms) are unknown names, as on Kafka 4; a topic that
stored one under an older Skiff keeps it in Redis, unreported and without effect.
Kafka's internal `internal.segment.bytes` (INTERNAL, for tests: a segment size below
segment.bytes' 1 MiB floor) is accepted, never listed, and wins over segment.bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from sidecar.config import storage_format
from sidecar.protocol.record_batch import CODEC_IDS, PRODUCER, Compression

if TYPE_CHECKING:
    from sidecar.config.settings import Settings
    from sidecar.storage.store import TopicInfo

LONG_MAX = 2**63 - 1
INTERNAL_SEGMENT_BYTES = "internal.segment.bytes"
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN = -(2**63)

# ConfigSource ids of CreateTopics v5+ / DescribeConfigs (Kafka's DescribeConfigsResponse).
SOURCE_TOPIC = 1  # TOPIC_CONFIG: set on the topic
SOURCE_STATIC_BROKER = 4  # STATIC_BROKER_CONFIG: a server flag changed the default
SOURCE_DEFAULT = 5  # DEFAULT_CONFIG: Kafka's default

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


class ConfigError(Exception):
    """An invalid topic config; str() is the message Kafka gives (INVALID_CONFIG)."""


def _invalid(name: str, value: Any, why: str) -> ConfigError:
    # Kafka's ConfigException(name, value, message) text.
    return ConfigError(f"Invalid value {_java_str(value)} for configuration {name}: {why}")


def _java_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


# -- types (ConfigDef.parseType) ---------------------------------------------------------

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SPLIT = re.compile(r"\s*,\s*")


def _parse_int(name: str, raw: str, lo: int, hi: int, type_name: str) -> int:
    text = raw.strip()
    if _INTEGER.fullmatch(text):
        value = int(text)
        if lo <= value <= hi:
            return value
    raise _invalid(name, raw, f"Not a number of type {type_name}")


def _parse(name: str, kind: str, raw: str) -> Any:
    if kind == "int":
        return _parse_int(name, raw, INT_MIN, INT_MAX, "INT")
    if kind == "long":
        return _parse_int(name, raw, LONG_MIN, LONG_MAX, "LONG")
    text = raw.strip()
    if kind == "boolean":
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise _invalid(name, raw, "Expected value to be either true or false")
    if kind == "double":
        if _DOUBLE.fullmatch(text):
            return float(text.rstrip("fFdD").replace("Infinity", "inf"))
        raise _invalid(name, raw, "Not a number of type DOUBLE")
    if kind == "list":
        return [] if not text else _LIST_SPLIT.split(text)
    return text  # string


def _format(kind: str, value: Any) -> str:
    """A parsed value as Kafka prints it (ConfigDef.convertToString)."""
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "list":
        return ",".join(value)
    return _java_str(value)


# -- validators ----------------------------------------------------------------------------

Validator = Callable[[str, Any], None]


def at_least(lo: int) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < lo:
            raise _invalid(name, value, f"Value must be at least {lo}")

    return check


def between(lo: int, hi: int) -> Validator:
    def check(name: str, value: Any) -> None:
        if value < lo:
            raise _invalid(name, value, f"Value must be at least {lo}")
        if value > hi:
            raise _invalid(name, value, f"Value must be no more than {hi}")

    return check


def one_of(*choices: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if isinstance(value, list) and "" in value:  # Kafka 4's ValidList
            raise ConfigError(f"Configuration '{name}' values must not be empty.")
        for item in value if isinstance(value, list) else [value]:
            if item not in choices:
                raise _invalid(name, item, "String must be one of: " + ", ".join(choices))

    return check


def _gzip_level(name: str, value: Any) -> None:
    if value != -1 and not 1 <= value <= 9:
        raise _invalid(name, value, "Value must be between 1 and 9 or equal to -1")


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str, value: Any) -> None:
    if all(_REPLICA.fullmatch(s.strip()) for s in value) or "".join(value) == "*":
        return
    raise _invalid(
        name,
        value,
        f"{name} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
    )


# -- the schema ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    kind: str  # int, long, double, boolean, string, list
    default: Any  # Kafka's default, parsed
    validator: Validator | None
    synonym: str | None  # the broker config that supplies the default (Kafka's synonym)
    setting: str | None  # the Settings attribute (a `skiff serve` flag) for the synonym
    applies: bool  # Skiff enforces it; the others are stored and reported only

    def parse(self, raw: str) -> Any:
        value = _parse(self.name, self.kind, raw)
        if self.validator is not None:
            self.validator(self.name, value)
        return value

    def format(self, value: Any) -> str:
        return _format(self.kind, value)


def _key(
    name: str,
    kind: str,
    default: Any,
    validator: Validator | None = None,
    synonym: str | None = None,
    setting: str | None = None,
    applies: bool = False,
) -> ConfigKey:
    return ConfigKey(name, kind, default, validator, synonym, setting, applies)


# Kafka 4.4's LogConfig, with its defaults (checked against a 4.4.0 broker's CreateTopics
# v7 answer) and validators.
KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        _key(
            "cleanup.policy",
            "list",
            ["delete"],
            one_of("compact", "delete"),
            "log.cleanup.policy",
            "log_cleanup_policy",
            applies=True,
        ),
        _key(
            "compression.gzip.level", "int", -1, _gzip_level, "compression.gzip.level", applies=True
        ),
        _key(
            "compression.lz4.level", "int", 9, between(1, 17), "compression.lz4.level", applies=True
        ),
        _key(
            "compression.type",
            "string",
            "producer",
            one_of(*COMPRESSION_TYPES),
            "compression.type",
            "compression_type",
            applies=True,
        ),
        _key(
            "compression.zstd.level",
            "int",
            3,
            between(-131072, 22),
            "compression.zstd.level",
            applies=True,
        ),
        _key(
            "delete.retention.ms",
            "long",
            86_400_000,
            at_least(0),
            "log.cleaner.delete.retention.ms",
            applies=True,
        ),
        _key("file.delete.delay.ms", "long", 60_000, at_least(0), "log.segment.delete.delay.ms"),
        _key("flush.messages", "long", LONG_MAX, at_least(1), "log.flush.interval.messages"),
        _key("flush.ms", "long", LONG_MAX, at_least(0), "log.flush.interval.ms"),
        _key("follower.replication.throttled.replicas", "list", [], _throttled_replicas),
        _key("index.interval.bytes", "int", 4096, at_least(0), "log.index.interval.bytes"),
        _key("leader.replication.throttled.replicas", "list", [], _throttled_replicas),
        _key(
            "local.retention.bytes",
            "long",
            -2,
            at_least(-2),
            "log.local.retention.bytes",
            "log_local_retention_bytes",
            applies=True,
        ),
        _key(
            "local.retention.ms",
            "long",
            -2,
            at_least(-2),
            "log.local.retention.ms",
            "log_local_retention_ms",
            applies=True,
        ),
        _key(
            "max.compaction.lag.ms",
            "long",
            LONG_MAX,
            at_least(1),
            "log.cleaner.max.compaction.lag.ms",
            applies=True,
        ),
        _key(
            "max.message.bytes",
            "int",
            1_048_588,
            at_least(0),
            "message.max.bytes",
            "message_max_bytes",
            applies=True,
        ),
        _key(
            "message.timestamp.after.max.ms",
            "long",
            3_600_000,
            at_least(0),
            "log.message.timestamp.after.max.ms",
            "log_message_timestamp_after_max_ms",
            applies=True,
        ),
        _key(
            "message.timestamp.before.max.ms",
            "long",
            LONG_MAX,
            at_least(0),
            "log.message.timestamp.before.max.ms",
            "log_message_timestamp_before_max_ms",
            applies=True,
        ),
        _key(
            "message.timestamp.type",
            "string",
            "CreateTime",
            one_of(*TIMESTAMP_TYPES),
            "log.message.timestamp.type",
            "message_timestamp_type",
            applies=True,
        ),
        _key(
            "min.cleanable.dirty.ratio",
            "double",
            0.5,
            between(0, 1),
            "log.cleaner.min.cleanable.ratio",
            applies=True,
        ),
        _key(
            "min.compaction.lag.ms",
            "long",
            0,
            at_least(0),
            "log.cleaner.min.compaction.lag.ms",
            applies=True,
        ),
        _key(
            "min.insync.replicas",
            "int",
            1,
            at_least(1),
            "min.insync.replicas",
            "min_insync_replicas",
            applies=True,
        ),
        _key("preallocate", "boolean", False, None, "log.preallocate"),
        _key(
            "max.decompressed.message.bytes",
            "int",
            2_147_483_639,
            at_least(1),
            "max.decompressed.message.bytes",
        ),
        _key("errors.deadletterqueue.group.enable", "boolean", False),
        _key(INTERNAL_SEGMENT_BYTES, "int", None, applies=True),
        _key("remote.log.copy.disable", "boolean", False, applies=True),
        _key("remote.copy.lag.bytes", "long", -1, at_least(-1), "log.remote.copy.lag.bytes"),
        _key("remote.copy.lag.ms", "long", 0, at_least(-1), "log.remote.copy.lag.ms"),
        _key("remote.log.delete.on.disable", "boolean", False, applies=True),
        _key("remote.storage.enable", "boolean", False, applies=True),
        _key(
            "retention.bytes",
            "long",
            -1,
            None,
            "log.retention.bytes",
            "log_retention_bytes",
            applies=True,
        ),
        _key(
            "retention.ms",
            "long",
            604_800_000,
            at_least(-1),
            "log.retention.ms",
            "log_retention_ms",
            applies=True,
        ),
        _key(
            "segment.bytes",
            "int",
            1_073_741_824,
            at_least(1024 * 1024),
            "log.segment.bytes",
            applies=True,
        ),
        _key("segment.index.bytes", "int", 10_485_760, at_least(4), "log.index.size.max.bytes"),
        _key("segment.jitter.ms", "long", 0, at_least(0), "log.roll.jitter.ms"),
        _key("segment.ms", "long", 604_800_000, at_least(1), "log.roll.ms"),
        _key(
            "unclean.leader.election.enable",
            "boolean",
            False,
            None,
            "unclean.leader.election.enable",
        ),
    )
}
NAMES = tuple(sorted(name for name in KEYS if name != INTERNAL_SEGMENT_BYTES))  # listed
# LogConfig's definition order (Kafka 4.4): Kafka parses (and reports the first bad value) in it.
KAFKA_ORDER = (
    "segment.bytes segment.ms segment.jitter.ms segment.index.bytes flush.messages flush.ms "
    "retention.bytes retention.ms max.message.bytes index.interval.bytes delete.retention.ms "
    "min.compaction.lag.ms max.compaction.lag.ms file.delete.delay.ms min.cleanable.dirty.ratio "
    "cleanup.policy unclean.leader.election.enable min.insync.replicas compression.type "
    "compression.gzip.level compression.lz4.level compression.zstd.level preallocate "
    "message.timestamp.type message.timestamp.before.max.ms message.timestamp.after.max.ms "
    "leader.replication.throttled.replicas follower.replication.throttled.replicas "
    "remote.storage.enable local.retention.ms local.retention.bytes remote.log.copy.disable "
    "remote.copy.lag.ms remote.copy.lag.bytes remote.log.delete.on.disable "
    "max.decompressed.message.bytes errors.deadletterqueue.group.enable internal.segment.bytes"
).split()
assert sorted(KAFKA_ORDER) == sorted(KEYS)

KAFKA_DEFAULTS: dict[str, Any] = {name: key.default for name, key in KEYS.items()}


def server_defaults(settings: Settings) -> dict[str, Any]:
    """Every topic config's default on this server: Kafka's, or the flag's."""
    out = dict(KAFKA_DEFAULTS)
    for name, key in KEYS.items():
        if key.setting is not None:
            value = getattr(settings, key.setting)
            # A list config's flag is its comma-separated text (log.cleanup.policy).
            out[name] = key.parse(value) if key.kind == "list" and isinstance(value, str) else value
    return out


def validate(
    configs: Iterable[tuple[str, str | None]],
    defaults: Mapping[str, Any] | None = None,
    remote_storage: bool = False,
    previous: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """CreateTopics `configs` (or an alteration's new overrides, `previous` the topic's
    current ones) → the overrides to store (raw strings, the last of a repeated name
    wins, as in Kafka). `defaults`: the server defaults the overrides combine with;
    `remote_storage`: whether this server has tiered storage. Raises ConfigError with
    Kafka's message."""
    given: dict[str, str | None] = {}
    for name, value in configs:
        given[name] = value
    nulls = [name for name, value in given.items() if value is None]
    if nulls:
        raise ConfigError("Null value not supported for topic configs: " + ",".join(nulls))
    for name in given:
        if name not in KEYS and name != storage_format.CONFIG:
            raise ConfigError(f"Unknown topic config name: {name}")
    if storage_format.CONFIG in given:
        try:
            storage_format.parse(given[storage_format.CONFIG])
        except storage_format.FormatError as exc:
            raise ConfigError(str(exc)) from None
    overrides: dict[str, str] = {name: value for name, value in given.items() if value is not None}
    parsed = parse_overrides(overrides)
    lag_min = parsed.get("min.compaction.lag.ms", KAFKA_DEFAULTS["min.compaction.lag.ms"])
    lag_max = parsed.get("max.compaction.lag.ms", KAFKA_DEFAULTS["max.compaction.lag.ms"])
    if lag_min > lag_max:
        raise ConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({lag_min}) > "
            f"max.compaction.lag.ms ({lag_max})"
        )
    _check_remote(effective(overrides, defaults or KAFKA_DEFAULTS), remote_storage, previous)
    return overrides


def _check_remote(
    config: Mapping[str, Any], system_enabled: bool, previous: Mapping[str, str] | None
) -> None:
    """Kafka's LogConfig.validate for tiered storage (KIP-405, KIP-950)."""
    if not config["remote.storage.enable"]:
        was = previous is not None and previous.get("remote.storage.enable", "").lower() == "true"
        if was and not config["remote.log.delete.on.disable"]:
            raise ConfigError(
                "It is invalid to disable remote storage without deleting remote data. If you "
                "want to keep the remote data and turn to read only, please set "
                "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to "
                "disable remote storage and delete all remote data, please set "
                "`remote.storage.enable=false,remote.log.delete.on.disable=true`."
            )
        return
    if not system_enabled:
        raise ConfigError(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be "
            "configured with remote log storage."
        )
    if config["cleanup.policy"] not in ([], ["delete"]):
        raise ConfigError(
            "Remote log storage only supports topics with cleanup.policy=delete or "
            "cleanup.policy being an empty list."
        )
    for kind in ("bytes", "ms"):
        whole, local = config[f"retention.{kind}"], config[f"local.retention.{kind}"]
        if whole != -1 and local != -2:
            name = f"local.retention.{kind}"
            if local == -1:
                raise ConfigError(
                    f"Invalid value -1 for configuration {name}: Value must not be -1 as "
                    f"retention.{kind} value is set as {whole}."
                )
            if local > whole:
                raise ConfigError(
                    f"Invalid value {local} for configuration {name}: Value must not be more "
                    f"than retention.{kind} property value: {whole}"
                )
    if config["remote.log.copy.disable"]:
        for kind in ("bytes", "ms"):
            local = config[f"local.retention.{kind}"]
            if local != -2 and local != config[f"retention.{kind}"]:
                raise ConfigError(
                    f"When `remote.log.copy.disable` is set to true, the "
                    f"`local.retention.{kind}` and `retention.{kind}` must be set to the "
                    "identical value because there will be no more logs copied to the remote "
                    "storage."
                )


def parse_overrides(overrides: Mapping[str, str]) -> dict[str, Any]:
    """Stored overrides parsed (in Kafka's definition order, so the first error is
    Kafka's); raises ConfigError."""
    return {name: KEYS[name].parse(overrides[name]) for name in KAFKA_ORDER if name in overrides}


def effective(overrides: Mapping[str, str], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The effective config: parsed overrides over `defaults`. An override that no longer
    parses (written by hand into Redis) is skipped."""
    return {**defaults, **parse_known(overrides, KEYS)}


class Parser(Protocol):
    def parse(self, raw: str) -> Any: ...


def parse_known(raw: Mapping[str, str], keys: Mapping[str, Parser]) -> dict[str, Any]:
    """The values of `raw` whose names `keys` knows, parsed; a value that no longer parses
    (written by hand into Redis) is left out."""
    out = {}
    for name, text in raw.items():
        key = keys.get(name)
        if key is None:
            continue
        try:
            out[name] = key.parse(text)
        except ConfigError:
            continue
    return out


def effective_config(info: TopicInfo, name: str) -> Any:
    """One config of a topic, parsed: what the hot paths call (a dict lookup)."""
    return info.config[name]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    source: int  # SOURCE_*
    read_only: bool = False
    sensitive: bool = False


def describe(overrides: Mapping[str, str], defaults: Mapping[str, Any]) -> list[ConfigEntry]:
    """Every topic config sorted by name, as CreateTopics v5+ lists them: the value as
    given for an override (TOPIC_CONFIG), else the server default (STATIC_BROKER_CONFIG
    when a flag changed Kafka's default, else DEFAULT_CONFIG)."""
    out = []
    for name in NAMES:
        key = KEYS[name]
        if name in overrides:
            out.append(ConfigEntry(name, overrides[name], SOURCE_TOPIC))
        else:
            value = defaults.get(name, key.default)
            source = SOURCE_DEFAULT if value == key.default else SOURCE_STATIC_BROKER
            out.append(ConfigEntry(name, key.format(value), source))
    return out


def timestamp_bounds(config: Mapping[str, Any]) -> tuple[int, int] | None:
    """(before, after) max ms for CreateTime records of an effective config, or None when
    timestamps are not checked (LogAppendTime, or both unbounded)."""
    if config["message.timestamp.type"] != "CreateTime":
        return None
    before = config["message.timestamp.before.max.ms"]
    after = config["message.timestamp.after.max.ms"]
    if before == LONG_MAX and after == LONG_MAX:
        return None
    return before, after


def segment_bytes(config: Mapping[str, Any]) -> int:
    """The segment size of an effective config: internal.segment.bytes when set (Kafka's
    LogConfig.segmentSize)."""
    internal = config.get(INTERNAL_SEGMENT_BYTES)
    return config["segment.bytes"] if internal is None else internal


# compression.type=producer: Kafka serves the producer's own bytes, but Skiff compresses
# on every fetch, so it uses each codec's fast level (gzip 1, lz4's fast compressor,
# zstd 1): 1.0 us a 100-byte record for gzip against 4.4 us at level 6, for 2% more
# bytes (docs/architecture.md). The compression.<codec>.level configs apply, as in
# Kafka, where compression.type names the codec.
PRODUCER_COMPRESSION = Compression(PRODUCER, gzip_level=1, lz4_level=1, zstd_level=1)


def fetch_compression(info: TopicInfo) -> Compression:
    """How Fetch compresses the topic's batches (its compression.type and levels)."""
    config = info.config
    kind = config["compression.type"]
    if kind == "producer":
        return PRODUCER_COMPRESSION
    return _compression(
        CODEC_IDS[kind],
        config["compression.gzip.level"],
        config["compression.lz4.level"],
        config["compression.zstd.level"],
    )


@lru_cache(maxsize=256)
def _compression(codec: int, gzip_level: int, lz4_level: int, zstd_level: int) -> Compression:
    return Compression(codec, gzip_level, lz4_level, zstd_level)
