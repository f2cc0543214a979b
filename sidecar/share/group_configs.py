"""Group configs (IncrementalAlterConfigs and DescribeConfigs with resource type GROUP,
32): consumer groups' (consumer.*, sidecar/groups/group_configs.py) and share groups',
the latter mapped onto the queue core's group settings:

| Kafka group config | queue setting | Skiff range |
|---|---|---|
| share.record.lock.duration.ms | lock_ms | 1000..3600000 (Kafka: 15000..60000 by default) |
| share.delivery.count.limit | delivery_limit | 1..1000 (Kafka: 2..10) |
| share.auto.offset.reset | auto_offset_reset | earliest, latest |
| errors.deadletterqueue.topic.name | dead_letter_topic | a topic name (KIP-1191's name) |
| share.isolation.level | isolation_level | read_uncommitted, read_committed |

SET sets, DELETE goes back to the default (for the lock duration and the delivery limit
the server's: --group-share-record-lock-duration-ms, --group-share-delivery-count-limit);
APPEND and SUBTRACT are refused, as Kafka
refuses them for non-list configs."""

from __future__ import annotations

from typing import Any

from sidecar.groups import group_configs as consumer_configs
from sidecar.protocol import errors
from sidecar.queues.core import DEFAULT_DELIVERY_LIMIT, DEFAULT_LOCK_MS, QueueError
from sidecar.share.records import queues

GROUP = 32
SET, DELETE = 0, 1
MIN_LOCK_MS = 1000

_NAMES = {
    "share.record.lock.duration.ms": "lock_ms",
    "share.delivery.count.limit": "delivery_limit",
    "share.auto.offset.reset": "auto_offset_reset",
    "errors.deadletterqueue.topic.name": "dead_letter_topic",
    "share.isolation.level": "isolation_level",
}
_DEFAULTS: dict[str, Any] = {
    "lock_ms": DEFAULT_LOCK_MS,
    "delivery_limit": DEFAULT_DELIVERY_LIMIT,
    "auto_offset_reset": "latest",
    "dead_letter_topic": None,
    "isolation_level": "read_uncommitted",
}


def _answer(resource: Any, code: int = errors.NONE, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }


def _defaults(broker: Any) -> dict[str, Any]:
    core = queues(broker)
    return {
        **_DEFAULTS,
        "lock_ms": core.default_lock_ms,
        "delivery_limit": core.default_delivery_limit,
    }


def _changes(resource: Any, unset: list[str]) -> dict[str, Any] | str:
    """The SETs as queue settings; DELETEs of server-defaulted settings go to `unset`."""
    out: dict[str, Any] = {}
    for c in resource.configs:
        if c.name in consumer_configs.BOUNDS:
            continue  # a consumer group's (sidecar/groups/group_configs.py)
        setting = _NAMES.get(c.name)
        if setting is None:
            return f"Unknown group config name: {c.name}"
        if c.config_operation == DELETE:
            if setting in ("lock_ms", "delivery_limit"):
                unset.append(setting)
                out.pop(setting, None)
            else:
                out[setting] = _DEFAULTS[setting]
            continue
        if c.config_operation != SET:
            return f"Config {c.name} is not a list: only SET and DELETE apply."
        value: Any = c.value
        if value is None:
            return f"Null value not supported for: {c.name}"
        if setting in ("lock_ms", "delivery_limit"):
            try:
                value = int(value)
            except ValueError:
                return (
                    f"Invalid value {c.value} for configuration {c.name}: Not a number of type INT"
                )
            if setting == "lock_ms" and value < MIN_LOCK_MS:
                return (
                    f"Invalid value {value} for configuration {c.name}: "
                    f"Value must be at least {MIN_LOCK_MS}"
                )
        out[setting] = value
    return out


GROUP_CONFIG_SOURCE, DEFAULT_CONFIG_SOURCE = 8, 5  # Kafka's DescribeConfigs sources
_TYPES = {
    "lock_ms": 3,
    "delivery_limit": 3,
    "auto_offset_reset": 2,
    "dead_letter_topic": 2,
    "isolation_level": 2,
}


def _entry(
    name: str, text: str | None, source: int, config_type: int, synonyms: bool
) -> dict[str, Any]:
    return {
        "name": name,
        "value": text,
        "read_only": False,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": [{"name": name, "value": text, "source": source}] if synonyms else [],
        "config_type": config_type,
        "documentation": None,
    }


async def describe(broker: Any, resource: Any, synonyms: bool) -> dict[str, Any]:
    """DescribeConfigs of a GROUP resource: the share-group configs above, GROUP_CONFIG
    where the group's value differs from the default (DEFAULT_CONFIG otherwise)."""
    group_id = resource.resource_name
    core = queues(broker)
    out = {**_answer(resource), "error_message": "", "configs": []}
    if not await core.exists(group_id):
        cfg = None
    else:
        cfg = (await core.config(group_id)).as_dict()
    wanted = resource.configuration_keys
    explicit = await broker.groups.configs.current(group_id)
    for name in consumer_configs.NAMES:  # Kafka's GroupConfig defines these first
        if wanted and name not in wanted:
            continue
        value = explicit.get(name)
        source = DEFAULT_CONFIG_SOURCE if value is None else GROUP_CONFIG_SOURCE
        text = str(broker.groups.configs.defaults[name] if value is None else value)
        out["configs"].append(_entry(name, text, source, 3, synonyms))  # 3: INT
    defaults = _defaults(broker)
    for name, setting in _NAMES.items():
        if wanted and name not in wanted:
            continue
        value = cfg[setting] if cfg else defaults[setting]
        is_default = value == defaults[setting]
        source = DEFAULT_CONFIG_SOURCE if is_default else GROUP_CONFIG_SOURCE
        text = None if value is None else str(value)
        out["configs"].append(_entry(name, text, source, _TYPES[setting], synonyms))
    return out


async def alter(broker: Any, resource: Any, validate_only: bool) -> dict[str, Any]:
    group_id = resource.resource_name
    if not group_id:
        return _answer(resource, errors.code("INVALID_REQUEST"), "Group name must not be empty.")
    consumer = consumer_configs.validate(resource, broker.groups.configs.defaults)
    if isinstance(consumer, str):
        return _answer(resource, errors.code("INVALID_CONFIG"), consumer)
    unset: list[str] = []
    changes = _changes(resource, unset)
    if isinstance(changes, str):
        return _answer(resource, errors.code("INVALID_CONFIG"), changes)
    if not validate_only and (consumer[0] or consumer[1]):
        await broker.groups.configs.alter(group_id, *consumer)
    if all(c.name in consumer_configs.BOUNDS for c in resource.configs):
        return _answer(resource)  # no share-group config: no queue settings to touch
    core = queues(broker)
    try:
        if validate_only:
            from sidecar.queues.core import validate_config

            validate_config(changes)
        else:
            await core.configure(group_id, **changes)
            await core.unset(group_id, *(u for u in unset if u not in changes))
    except QueueError as exc:
        return _answer(resource, errors.code("INVALID_CONFIG"), exc.message)
    return _answer(resource)
