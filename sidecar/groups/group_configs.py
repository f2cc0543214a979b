"""Group configs: Kafka 4.4's GroupConfig (resource type GROUP, 32, of DescribeConfigs and
IncrementalAlterConfigs), its 27 configs (21 listed, 6 internal ones listed only once a
group sets them), their types, defaults, broker synonyms and checks, with Kafka 4.4.0's
messages (checked against a 4.4.0 broker). sidecar/share/group_configs.py answers the
two requests with them.

Where they live and what applies them:

- consumer.session.timeout.ms, consumer.heartbeat.interval.ms: hash skiff:group_configs,
  applied by the consumer group coordinator (groups/coordinator.py,
  apis/consumer_group_heartbeat.py);
- share.session.timeout.ms, share.heartbeat.interval.ms: hash skiff:group_configs,
  applied to share groups (share/membership.py, apis/share_group_heartbeat.py);
- streams.session.timeout.ms, streams.heartbeat.interval.ms,
  streams.num.standby.replicas: hash skiff:group_configs, applied to streams groups
  (GroupCoordinator.streams_config; server defaults: the consumer session and heartbeat
  flags and --group-streams-num-standby-replicas);
- share.record.lock.duration.ms, share.delivery.count.limit, share.auto.offset.reset
  (by_duration:<d> too), share.isolation.level, errors.deadletterqueue.topic.name: the
  queue group's settings (queues/core.py lock_ms, delivery_limit, auto_offset_reset,
  isolation_level, dead_letter_topic), applied by the queue core as for HTTP queue
  groups (sidecar/share/group_configs.py maps them);
- everything else: hash skiff:group_configs, stored, checked and described as Kafka
  does, applied by nothing yet.

Stored but not applied yet: share.partition.max.record.locks (the server's
--group-share-partition-max-record-locks applies to every group),
share.renew.acknowledge.enable (RENEW is always allowed), share.assignment.interval.ms
and consumer.assignment.interval.ms (assignments are computed on every change),
errors.deadletterqueue.copy.record.enable (dead-lettered records are always copied),
the other streams.* configs (no initial rebalance delay, assignment interval, rack-aware
placement or other assignor in Skiff's streams groups) and the internal
*.assignor.offload.enable, streams.task.offset.interval.ms, streams.num.warmup.replicas
and streams.acceptable.recovery.lag.

Defaults are the server's flags where Skiff has one (--group-consumer-session-timeout-ms,
--group-consumer-heartbeat-interval-ms, --group-share-session-timeout-ms,
--group-share-heartbeat-interval-ms, --group-share-record-lock-duration-ms,
--group-share-delivery-count-limit, --group-share-partition-max-record-locks; their
defaults are Kafka's), Kafka 4.4's defaults otherwise. Kafka bounds the values with
broker configs (group.consumer.min/max.session.timeout.ms, ...) Skiff has no flags for:
their Kafka defaults, widened to the server default where that lies outside them (tests
run sidecars with short sessions). So share.record.lock.duration.ms is 15000..60000 and
share.delivery.count.limit 2..10 here, as in Kafka; the HTTP queue API keeps Skiff's own
ranges for the same settings (lock_ms 1..3600000, delivery_limit 1..1000).

skiff:group_configs: field `<group>\\0<name>` -> the value as Kafka describes it (numbers,
booleans and lists normalised; internal configs as sent, as Kafka shows them), so two
sidecars altering different configs of one group do not overwrite each other. Each
sidecar keeps a copy for its coordinators (a heartbeat costs Redis nothing), read again
at most every REFRESH_S seconds when asked and at once after its own alteration."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from sidecar.groups.group_config_docs import GROUP_DOCS

log = logging.getLogger(__name__)

CONFIGS_KEY = "skiff:group_configs"
SESSION = "consumer.session.timeout.ms"
HEARTBEAT = "consumer.heartbeat.interval.ms"
STREAMS_SESSION = "streams.session.timeout.ms"
STREAMS_HEARTBEAT = "streams.heartbeat.interval.ms"
STREAMS_STANDBYS = "streams.num.standby.replicas"
SHARE_SESSION = "share.session.timeout.ms"
SHARE_HEARTBEAT = "share.heartbeat.interval.ms"
TAGS = "streams.rack.aware.assignment.tags"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
REFRESH_S = 1.0

# DescribeConfigs' config types and sources
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 4, 5, 8
# Error codes of IncrementalAlterConfigs answers
UNKNOWN_SERVER_ERROR, INVALID_CONFIG, INVALID_REQUEST = -1, 40, 42


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    name: str
    kind: int  # DescribeConfigs config type
    default: str  # Kafka 4.4's default, as DescribeConfigs prints it
    synonym: str  # the broker config listed as its synonym (else the name itself)
    at_least: int | None = None  # ConfigDef's Range.atLeast
    internal: bool = False

    @property
    def doc(self) -> str:
        return GROUP_DOCS[self.name]


def _key(name: str, kind: int, default: str, at_least: int | None = None, **kw: Any) -> Any:
    synonym = kw.pop("synonym", "group." + name)
    return GroupConfigKey(name, kind, default, synonym, at_least, **kw)


# In GroupConfig's definition order: ConfigDef.parse checks the values in it.
KEYS: dict[str, GroupConfigKey] = {
    k.name: k
    for k in (
        _key("consumer.session.timeout.ms", INT, "45000", 1),
        _key("consumer.heartbeat.interval.ms", INT, "5000", 1),
        _key("consumer.assignment.interval.ms", INT, "1000", 0),
        _key("consumer.assignor.offload.enable", BOOLEAN, "true", internal=True),
        _key("share.session.timeout.ms", INT, "45000", 1),
        _key("share.heartbeat.interval.ms", INT, "5000", 1),
        _key("share.record.lock.duration.ms", INT, "30000", 1000),
        _key("share.delivery.count.limit", INT, "5", 2),
        _key("share.partition.max.record.locks", INT, "2000", 100),
        _key("share.auto.offset.reset", STRING, "latest", synonym="share.auto.offset.reset"),
        _key("share.isolation.level", STRING, "read_uncommitted", synonym="share.isolation.level"),
        _key(
            "share.renew.acknowledge.enable",
            BOOLEAN,
            "true",
            synonym="share.renew.acknowledge.enable",
        ),
        _key("share.assignment.interval.ms", INT, "1000", 0),
        _key("share.assignor.offload.enable", BOOLEAN, "true", internal=True),
        _key("streams.session.timeout.ms", INT, "45000", 1),
        _key("streams.heartbeat.interval.ms", INT, "5000", 1),
        _key("streams.num.standby.replicas", INT, "0", 0),
        _key("streams.initial.rebalance.delay.ms", INT, "3000", 0),
        _key("streams.assignment.interval.ms", INT, "1000", 0),
        _key("streams.assignor.offload.enable", BOOLEAN, "true", internal=True),
        _key("streams.task.offset.interval.ms", INT, "60000", 1, internal=True),
        _key("streams.num.warmup.replicas", INT, "2", 0, internal=True),
        _key(TAGS, LIST, ""),
        _key("streams.acceptable.recovery.lag", LONG, "10000", 0, internal=True),
        _key("streams.assignor.name", STRING, "sticky", synonym="group.streams.assignors"),
        _key(DLQ_TOPIC, STRING, "", synonym=DLQ_TOPIC),
        _key(
            "errors.deadletterqueue.copy.record.enable",
            BOOLEAN,
            "false",
            synonym="errors.deadletterqueue.copy.record.enable",
        ),
    )
}
# DescribeConfigs lists the internal configs a group sets first, then the others, in a
# Kafka 4.4 broker's HashMap orders (of 32 buckets).
INTERNAL_ORDER = (
    "share.assignor.offload.enable",
    "streams.num.warmup.replicas",
    "consumer.assignor.offload.enable",
    "streams.acceptable.recovery.lag",
    "streams.assignor.offload.enable",
    "streams.task.offset.interval.ms",
)
PUBLIC_ORDER = (
    "consumer.session.timeout.ms",
    "streams.assignor.name",
    "consumer.assignment.interval.ms",
    "errors.deadletterqueue.copy.record.enable",
    "share.auto.offset.reset",
    TAGS,
    "share.renew.acknowledge.enable",
    "streams.initial.rebalance.delay.ms",
    "share.session.timeout.ms",
    "streams.assignment.interval.ms",
    "share.heartbeat.interval.ms",
    "streams.heartbeat.interval.ms",
    "share.delivery.count.limit",
    DLQ_TOPIC,
    "consumer.heartbeat.interval.ms",
    "share.record.lock.duration.ms",
    "share.assignment.interval.ms",
    "share.isolation.level",
    "streams.session.timeout.ms",
    "share.partition.max.record.locks",
    "streams.num.standby.replicas",
)
# GroupConfig.validateValues, in its order: (min, max) from Kafka's broker configs'
# defaults (group.consumer.min.session.timeout.ms, ...); None: no such bound.
BOUNDS: dict[str, tuple[int | None, int | None]] = {
    HEARTBEAT: (5000, 15000),
    SESSION: (45000, 60000),
    "consumer.assignment.interval.ms": (0, 15000),
    SHARE_HEARTBEAT: (5000, 15000),
    SHARE_SESSION: (45000, 60000),
    "share.record.lock.duration.ms": (15000, 60000),
    "share.delivery.count.limit": (2, 10),
    "share.partition.max.record.locks": (100, 4000),
    "share.assignment.interval.ms": (0, 15000),
    "streams.heartbeat.interval.ms": (5000, 15000),
    "streams.session.timeout.ms": (45000, 60000),
    "streams.num.standby.replicas": (None, 2),
    "streams.assignment.interval.ms": (0, 15000),
    "streams.task.offset.interval.ms": (15000, None),
    "streams.num.warmup.replicas": (None, 20),
}
SESSION_OVER_HEARTBEAT = (
    (SESSION, HEARTBEAT),
    (SHARE_SESSION, SHARE_HEARTBEAT),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)
STREAMS_ASSIGNORS = ["sticky"]  # Kafka's group.streams.assignors
# The server's flags (Settings attributes) that are these configs' defaults.
FLAGS = {
    SESSION: "group_consumer_session_timeout_ms",
    HEARTBEAT: "group_consumer_heartbeat_interval_ms",
    SHARE_SESSION: "group_share_session_timeout_ms",
    SHARE_HEARTBEAT: "group_share_heartbeat_interval_ms",
    "share.record.lock.duration.ms": "group_share_record_lock_duration_ms",
    "share.delivery.count.limit": "group_share_delivery_count_limit",
    "share.partition.max.record.locks": "group_share_partition_max_record_locks",
}


def server_defaults(settings: Any) -> dict[str, str]:
    """Every group config's value for a group that does not set it."""
    out = {name: key.default for name, key in KEYS.items()}
    for name, attr in FLAGS.items():
        value = getattr(settings, attr, None)
        if value is not None:
            out[name] = str(int(value))
    return out


# -- checks ---------------------------------------------------------------------------


class _Invalid(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class Alteration:
    """A valid IncrementalAlterConfigs of one group: the values to set (as described)
    and the names to delete."""

    sets: dict[str, str]
    deletes: list[str]


def _trim(text: str) -> str:
    """Java's String.trim: every character up to U+0020 goes from both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


_NUMBER = re.compile(r"[+-]?[0-9]+")
_LIMITS = {INT: ("INT", 2**31), LONG: ("LONG", 2**63)}
_LIST_SPLIT = re.compile(r"[ \t\n\x0b\x0c\r]*,[ \t\n\x0b\x0c\r]*")
# java.time.Duration.parse
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
BY_DURATION = "by_duration:"


def duration_ms(text: str) -> int | None:
    """java.time.Duration.parse of an ISO-8601 duration (PnDTnHnMn.nS), in ms (rounded
    down), or None where Java refuses it (bad syntax, a long overflow)."""
    m = _DURATION.fullmatch(text)
    if m is None:
        return None
    negate, days, t_part, hours, minutes, seconds, fraction = m.groups()
    if t_part is not None and t_part.upper() == "T":
        return None  # a T with nothing after it
    if days is None and hours is None and minutes is None and seconds is None:
        return None
    total = 0
    for part, unit in ((days, 86400), (hours, 3600), (minutes, 60), (seconds, 1)):
        if part is None:
            continue
        value = int(part)
        if not _LONG_MIN <= value <= _LONG_MAX or not _LONG_MIN <= value * unit <= _LONG_MAX:
            return None
        total += value * unit
        if not _LONG_MIN <= total <= _LONG_MAX:
            return None
    nanos = int((fraction or "").ljust(9, "0")) if fraction else 0
    if seconds is not None and seconds.startswith("-"):
        nanos = -nanos
    total_nanos = total * 1_000_000_000 + nanos
    if negate == "-":
        total_nanos = -total_nanos
    return total_nanos // 1_000_000


def valid_auto_offset_reset(value: str) -> bool:
    """Kafka's ShareGroupAutoOffsetResetStrategy: earliest, latest or by_duration:<a
    non-negative ISO-8601 duration>."""
    if value in ("earliest", "latest"):
        return True
    if not value.startswith(BY_DURATION):
        return False
    ms = duration_ms(value[len(BY_DURATION) :])
    return ms is not None and ms >= 0


def _invalid(value: Any, name: str, message: str) -> _Invalid:
    return _Invalid(f"Invalid value {value} for configuration {name}: {message}")


def _parse(key: GroupConfigKey, raw: str) -> Any:
    """ConfigDef's parsing and validator of one value (its messages)."""
    text = _trim(raw)
    if key.kind in (INT, LONG):
        type_name, limit = _LIMITS[key.kind]
        if not _NUMBER.fullmatch(text) or not -limit <= int(text) < limit:
            raise _invalid(raw, key.name, f"Not a number of type {type_name}")
        number = int(text)
        if key.at_least is not None and number < key.at_least:
            raise _invalid(number, key.name, f"Value must be at least {key.at_least}")
        return number
    if key.kind == BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise _invalid(raw, key.name, "Expected value to be either true or false")
        return text.lower() == "true"
    if key.kind == LIST:
        items = _LIST_SPLIT.split(text) if text else []
        if "" in items:
            raise _Invalid(f"Configuration '{key.name}' values must not be empty.")
        return items
    if key.name == "share.isolation.level" and text not in ("read_committed", "read_uncommitted"):
        raise _invalid(text, key.name, "String must be one of: read_committed, read_uncommitted")
    if key.name == "share.auto.offset.reset" and not valid_auto_offset_reset(text):
        raise _invalid(
            text,
            key.name,
            f"Invalid value `{text}` for configuration {key.name}. The value must be either "
            "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
        )
    return text


def _as_text(key: GroupConfigKey, raw: str, parsed: Any) -> str:
    """The value as Kafka describes it: parsed and printed again, internal configs as
    sent."""
    if key.internal:
        return raw
    if isinstance(parsed, bool):
        return "true" if parsed else "false"
    if isinstance(parsed, list):
        return ",".join(parsed)
    return str(parsed)


def _java_order(names: list[str]) -> list[str]:
    """`names` in the iteration order of a java.util.HashMap they were put in."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = 0
        for ch in name:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(names, key=lambda n: (bucket(n), names.index(n)))


def _check_bounds(name: str, value: int, defaults: Mapping[str, str]) -> None:
    low, high = BOUNDS[name]
    if name in FLAGS:  # a server default outside Kafka's bounds widens them
        default = int(defaults[name])
        low = default if low is None else min(low, default)
        high = default if high is None else max(high, default)
    if low is not None and high is not None:
        if not low <= value <= high:
            raise _Invalid(f"{name} must be in the range {low} to {high} inclusive.")
    elif high is not None and value > high:
        raise _Invalid(f"{name} must be less than or equal to {high}")
    elif low is not None and value < low:
        raise _Invalid(f"{name} must be greater than or equal to {low}")


def validate(
    group_id: str, configs: Iterable[Any], stored: Mapping[str, str], defaults: Mapping[str, str]
) -> Alteration | tuple[int, str | None]:
    """The IncrementalAlterConfigs of one GROUP resource (its configs: name,
    config_operation, value) as a Kafka 4.4 broker takes it, or its (error code, message)
    in Kafka's order of checks: null values, duplicate names, operations (APPEND and
    SUBTRACT apply to no group config), the group name, unknown names, then the values
    as GroupConfig.validate checks them. `stored`: the group's explicit values (for the
    session > heartbeat check); `defaults`: server_defaults()."""
    configs = list(configs)
    nulls = [c.name for c in configs if c.config_operation != DELETE and c.value is None]
    if nulls:
        return INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
    if len({c.name for c in configs}) != len(configs):
        return INVALID_REQUEST, "Error due to duplicate config keys"
    if any(c.config_operation not in (SET, DELETE, APPEND, SUBTRACT) for c in configs):
        return UNKNOWN_SERVER_ERROR, None  # Kafka fails on an unknown operation
    for c in configs:
        if c.config_operation in (APPEND, SUBTRACT):
            op = "APPEND" if c.config_operation == APPEND else "SUBTRACT"
            return INVALID_CONFIG, f"Can't {op} to key {c.name} because its type is not LIST."
    if not group_id:
        return INVALID_REQUEST, "Default group resources are not allowed."
    sets = {c.name: c.value for c in configs if c.config_operation == SET}
    deletes = [c.name for c in configs if c.config_operation == DELETE]
    merged = {n: v for n, v in stored.items() if n not in deletes} | sets
    unknown = [n for n in _java_order(list(merged)) if n not in KEYS]
    if unknown:
        return INVALID_CONFIG, f"Unknown group config name: {unknown[0]}"
    try:
        if TAGS in sets:
            tags = _trim(sets[TAGS])
            split = _LIST_SPLIT.split(tags) if tags else []
            if len(set(split)) != len(split):
                raise _Invalid(f"{TAGS} must not contain duplicate tag keys.")
        parsed = {n: _parse(KEYS[n], sets[n]) for n in KEYS if n in sets}
        for name in BOUNDS:
            if name in parsed:
                _check_bounds(name, parsed[name], defaults)
        assignor = parsed.get("streams.assignor.name")
        if assignor is not None and assignor not in STREAMS_ASSIGNORS:
            raise _Invalid(
                f"streams.assignor.name '{assignor}' is not a registered task assignor. "
                f"Registered assignors are: [{', '.join(STREAMS_ASSIGNORS)}]."
            )
        for session, heartbeat in SESSION_OVER_HEARTBEAT:
            if session in merged or heartbeat in merged:
                s = parsed.get(session, int(merged.get(session, defaults[session])))
                h = parsed.get(heartbeat, int(merged.get(heartbeat, defaults[heartbeat])))
                if s <= h:
                    raise _Invalid(f"{session} must be greater than {heartbeat}")
        if parsed.get(DLQ_TOPIC, "").startswith("__"):
            raise _Invalid(f"{DLQ_TOPIC}: DLQ topic name must not start with '__'")
    except _Invalid as exc:
        return INVALID_CONFIG, exc.message
    texts = {n: _as_text(KEYS[n], sets[n], parsed[n]) for n in sets}
    return Alteration(texts, [n for n in deletes if n in KEYS])


def describe_entry(
    name: str, explicit: str | None, default: str, synonyms: bool, docs: bool
) -> dict[str, Any]:
    """One DescribeConfigs entry (Kafka's ConfigHelper.createGroupConfigEntry): the
    group's value (GROUP_CONFIG) over the broker's: a server flag that differs from
    Kafka's default is a static broker config, as Skiff describes its broker."""
    key = KEYS[name]
    listed: list[dict[str, Any]] = []
    if explicit is not None:
        listed.append({"name": name, "value": explicit, "source": GROUP_CONFIG})
    if default != key.default:
        listed.append({"name": key.synonym, "value": default, "source": STATIC_BROKER_CONFIG})
    listed.append({"name": key.synonym, "value": key.default, "source": DEFAULT_CONFIG})
    return {
        "name": name,
        "value": default if explicit is None else explicit,
        "read_only": False,
        "config_source": listed[0]["source"],
        "is_sensitive": False,
        "synonyms": listed if synonyms else [],
        "config_type": key.kind,
        "documentation": key.doc if docs else None,
    }


def listed_names(explicit: Iterable[str]) -> list[str]:
    """The configs DescribeConfigs lists for a group setting `explicit`, in Kafka's order."""
    explicit = set(explicit)
    return [n for n in INTERNAL_ORDER if n in explicit] + list(PUBLIC_ORDER)


# -- storage ------------------------------------------------------------------------


def _field(group_id: str, name: str) -> str:
    return f"{group_id}\0{name}"


class GroupConfigs:
    """This sidecar's copy of the group configs kept in skiff:group_configs (all but
    the share-group ones kept as queue settings)."""

    def __init__(self, redis: Redis | None, defaults: dict[str, int]) -> None:
        self.redis = redis
        self.defaults = defaults  # consumer.* server defaults (the coordinator's)
        self.values: dict[str, dict[str, str]] = {}
        self.loaded_at = -REFRESH_S
        self._refreshing: asyncio.Task[None] | None = None

    def get(self, group_id: str, name: str, default: int | None = None) -> int:
        """An INT config of the group: its own value, else `default`, else the server's."""
        self._maybe_refresh()
        value = self.values.get(group_id, {}).get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                log.warning("group %r: bad %s value %r in Redis", group_id, name, value)
        return self.defaults[name] if default is None else default

    def explicit(self, group_id: str) -> dict[str, str]:
        return dict(self.values.get(group_id, {}))

    def _maybe_refresh(self) -> None:
        if self.redis is None or time.monotonic() - self.loaded_at < REFRESH_S:
            return
        if self._refreshing is not None and not self._refreshing.done():
            return
        self.loaded_at = time.monotonic()  # one attempt per REFRESH_S, even failing
        self._refreshing = asyncio.get_running_loop().create_task(self.refresh())

    async def refresh(self) -> None:
        assert self.redis is not None
        try:
            raw = await self.redis.hgetall(CONFIGS_KEY)
        except Exception as exc:  # Redis away: keep what we had
            log.warning("could not read group configs from Redis: %s", exc)
            return
        values: dict[str, dict[str, str]] = {}
        for field, value in raw.items():
            group_id, _, name = field.decode().partition("\0")
            if name in KEYS:
                values.setdefault(group_id, {})[name] = value.decode()
        self.values = values
        self.loaded_at = time.monotonic()

    async def alter(self, group_id: str, sets: dict[str, str], deletes: list[str]) -> None:
        assert self.redis is not None
        async with self.redis.pipeline(transaction=True) as pipe:
            if deletes:
                pipe.hdel(CONFIGS_KEY, *(_field(group_id, n) for n in deletes))
            if sets:
                pipe.hset(CONFIGS_KEY, mapping={_field(group_id, n): v for n, v in sets.items()})
            await pipe.execute()
        await self.refresh()

    async def current(self, group_id: str) -> dict[str, str]:
        """The group's explicit values, read from Redis now (DescribeConfigs)."""
        assert self.redis is not None
        names = list(KEYS)
        raw = await self.redis.hmget(CONFIGS_KEY, [_field(group_id, n) for n in names])
        return {n: v.decode() for n, v in zip(names, raw, strict=True) if v is not None}
