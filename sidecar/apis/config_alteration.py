"""What AlterConfigs and IncrementalAlterConfigs share: one resource's alteration with
Kafka's checks in Kafka's order (duplicate or null values, the resource's name, the
topic's existence, then the new configs), and the answer entry; for BROKER resources,
the dynamic broker configs (config/dynamic_broker.py, storage/broker_configs.py). Not an
API module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.broker import Broker
from sidecar.config import dynamic_broker
from sidecar.config.admin import DELETE, AdminError, check_duplicates_and_nulls
from sidecar.protocol import errors
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage import topic_admin
from sidecar.validation.topic_names import invalid_name_reason

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def answer(resource: Any, code: int = errors.NONE, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }


def refusal(broker: Broker, request: Any, resource: Any) -> dict[str, Any] | None:
    """A resource's answer when the principal may not ALTER_CONFIGS it (Kafka's error
    for its resource type), else None: AlterConfigs and IncrementalAlterConfigs alike."""
    denied = checks.config_resource_denied(
        broker, request, Operation.ALTER_CONFIGS, resource.resource_type, resource.resource_name
    )
    return answer(resource, denied[0]) if denied else None


async def alter_broker(
    broker: Broker,
    resource: Any,
    ops: list[tuple[str, int, str | None]],
    validate_only: bool,
    incremental: bool = True,
) -> dict[str, Any]:
    """A BROKER resource's dynamic configs: `ops` IncrementalAlterConfigs' (name,
    operation, value), or (not `incremental`) AlterConfigs' whole new set as SETs."""
    dynamic = broker.dynamic
    try:
        deleted = {n for n, op, _ in ops if op == DELETE} if incremental else set()
        check_duplicates_and_nulls([(n, v) for n, _, v in ops], deleted, ", ")
        name = resource.resource_name
        per_broker = name != dynamic_broker.CLUSTER_DEFAULT
        if per_broker:
            dynamic_broker.node_id_of(name, broker.cluster.node_id)
        if incremental:
            dynamic_broker.apply_ops({}, ops)  # the checks of the operations themselves
        touched = [n for n, _, _ in ops]

        def change(current: dict[str, str]) -> dict[str, str]:
            if incremental:
                new = dynamic_broker.apply_ops(current, ops)
            else:
                new = {n: v or "" for n, _, v in ops}
            if per_broker:
                layers = (dynamic.cluster_default(), new)
            else:
                layers = (new, dynamic.node())
            dynamic_broker.validate(new, per_broker, dynamic.static_defaults, *layers)
            dynamic_broker.min_insync_rule(per_broker, touched, new)
            return new

        key = str(broker.cluster.node_id) if per_broker else dynamic_broker.CLUSTER_DEFAULT
        await dynamic.alter(key, change, validate_only)
    except AdminError as exc:
        return answer(resource, exc.code, exc.message)
    return answer(resource)


async def alter(
    broker: Broker,
    resource: Any,
    config_names: list[str],
    prepare: Callable[[], Callable[[dict[str, str]], dict[str, str]]],
    validate_only: bool,
) -> dict[str, Any]:
    """`prepare()` checks the request itself (raising AdminError) and returns the change
    to apply to the topic's current overrides."""
    try:
        change = prepare()
        name = resource.resource_name
        if resource.resource_type == TOPIC:
            reason = invalid_name_reason(name)
            if reason:
                raise AdminError(errors.INVALID_TOPIC_EXCEPTION, reason)
            info = await broker.store.get_topic(name)
            if info is not None and not info.batch_format:
                change = _no_remote_storage(change)
            try:
                await topic_admin.alter_configs(broker.store, name, change, validate_only)
            except topic_admin.TopicGone:
                change({})  # Kafka reports bad configs before a missing topic
                raise AdminError(
                    errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
                ) from None
        elif resource.resource_type == BROKER_LOGGER:
            if config_names:
                raise AdminError(
                    errors.INVALID_REQUEST, "Skiff has no log levels to change at run time."
                )
        else:
            raise AdminError(
                errors.INVALID_REQUEST, f"Unexpected resource type {resource.resource_type}"
            )
    except AdminError as exc:
        return answer(resource, exc.code, exc.message)
    return answer(resource)


def _no_remote_storage(
    change: Callable[[dict[str, str]], dict[str, str]],
) -> Callable[[dict[str, str]], dict[str, str]]:
    """A `record` topic cannot take remote.storage.enable=true (CreateTopics refuses it
    too): tiered storage archives stored batches (docs/tiered-storage.md)."""

    def checked(current: dict[str, str]) -> dict[str, str]:
        new = change(current)
        if new.get("remote.storage.enable", "").lower() == "true":
            raise AdminError(
                errors.INVALID_CONFIG,
                "remote.storage.enable=true needs skiff.storage.format=batch: tiered storage "
                "archives stored batches",
            )
        return new

    return checked
