"""DescribeConfigs and IncrementalAlterConfigs of GROUP resources (type 32), as a Kafka
4.4.0 broker answers them: its 27 group configs (sidecar/groups/group_configs.py has
their definitions, checks and messages, and where each is stored and applied).

Five share-group configs are the queue core's group settings (the same the HTTP queue
API sets), so they apply to share groups and queue groups alike:

| Kafka group config | queue setting |
|---|---|
| share.record.lock.duration.ms | lock_ms |
| share.delivery.count.limit | delivery_limit |
| share.auto.offset.reset | auto_offset_reset (earliest, latest, by_duration:<ISO-8601>) |
| errors.deadletterqueue.topic.name | dead_letter_topic ("" for none) |
| share.isolation.level | isolation_level |

The others are kept in Redis hash skiff:group_configs. SET sets, DELETE goes back to the
default (the server's flag where Skiff has one); APPEND and SUBTRACT are refused as
Kafka refuses them (no group config is a list to it). DescribeConfigs lists a config as
GROUP_CONFIG (8) where the group set it (a queue group's settings set through the HTTP
API count), else with the server's value (DEFAULT_CONFIG, 5, or STATIC_BROKER_CONFIG, 4,
where a flag differs from Kafka's default). One check is Skiff's own: a dead-letter
topic name must be a valid topic name (Skiff creates the topic when it first writes to
it); Kafka refuses only names starting with "__"."""

from __future__ import annotations

from typing import Any

from sidecar.groups import group_configs as configs
from sidecar.protocol import errors
from sidecar.queues.core import QueueError, config_key, validate_config
from sidecar.share.records import queues

GROUP = 32
QUEUE_SETTINGS = {
    "share.record.lock.duration.ms": "lock_ms",
    "share.delivery.count.limit": "delivery_limit",
    "share.auto.offset.reset": "auto_offset_reset",
    "errors.deadletterqueue.topic.name": "dead_letter_topic",
    "share.isolation.level": "isolation_level",
}


def _answer(resource: Any, code: int = errors.NONE, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }


async def _explicit(broker: Any, group_id: str) -> dict[str, str]:
    """The configs the group sets: skiff:group_configs' and its queue settings."""
    out = await broker.groups.configs.current(group_id)
    raw = await queues(broker).redis.hgetall(config_key(group_id))
    for name, setting in QUEUE_SETTINGS.items():
        value = raw.get(setting.encode())
        if value is not None:
            out[name] = value.decode()
    return out


async def describe(
    broker: Any, resource: Any, synonyms: bool, docs: bool = False
) -> dict[str, Any]:
    """DescribeConfigs of a GROUP resource: Kafka 4.4's list (groups need not exist)."""
    group_id = resource.resource_name
    out: dict[str, Any] = {**_answer(resource), "error_message": "", "configs": []}
    if not group_id:
        error = errors.INVALID_REQUEST
        return {**out, "error_code": error, "error_message": "Group name must not be empty"}
    explicit = await _explicit(broker, group_id)
    defaults = configs.server_defaults(broker.settings)
    wanted = resource.configuration_keys
    for name in configs.listed_names(explicit):
        if wanted and name not in wanted:
            continue
        entry = configs.describe_entry(name, explicit.get(name), defaults[name], synonyms, docs)
        out["configs"].append(entry)
    return out


def _queue_value(setting: str, text: str) -> Any:
    if setting in ("lock_ms", "delivery_limit"):
        return int(text)
    if setting == "dead_letter_topic":
        return text or None
    return text


async def alter(broker: Any, resource: Any, validate_only: bool) -> dict[str, Any]:
    """IncrementalAlterConfigs of a GROUP resource: all of it or nothing."""
    group_id = resource.resource_name
    stored = await broker.groups.configs.current(group_id) if group_id else {}
    defaults = configs.server_defaults(broker.settings)
    plan = configs.validate(group_id, resource.configs, stored, defaults)
    if not isinstance(plan, configs.Alteration):
        return _answer(resource, *plan)
    changes = {
        QUEUE_SETTINGS[n]: _queue_value(QUEUE_SETTINGS[n], v)
        for n, v in plan.sets.items()
        if n in QUEUE_SETTINGS
    }
    unset = [QUEUE_SETTINGS[n] for n in plan.deletes if n in QUEUE_SETTINGS]
    sets = {n: v for n, v in plan.sets.items() if n not in QUEUE_SETTINGS}
    deletes = [n for n in plan.deletes if n not in QUEUE_SETTINGS]
    try:
        validate_config(changes)  # Skiff's own check: a dead-letter topic's name
        if validate_only:
            return _answer(resource)
        core = queues(broker)
        if changes:  # creates the queue group
            await core.configure(group_id, **changes)
        if unset:
            await core.unset(group_id, *unset)
    except QueueError as exc:
        return _answer(resource, errors.code("INVALID_CONFIG"), exc.message)
    if sets or deletes:
        await broker.groups.configs.alter(group_id, sets, deletes)
    return _answer(resource)
