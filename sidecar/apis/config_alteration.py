"""What AlterConfigs and IncrementalAlterConfigs share: one resource's alteration with
Kafka's checks in Kafka's order (duplicate or null values, the resource's name, the
topic's existence, then the new configs), and the answer entry. Not an API module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.broker import Broker
from sidecar.config.admin import AdminError
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


def _refuse_broker(broker: Broker, name: str, config_names: list[str]) -> None:
    """Skiff has no dynamic broker configs (a sidecar's settings are its flags), so every
    broker config is refused as Kafka refuses its read-only ones."""
    if name != "":
        try:
            wanted = int(name)
        except ValueError:
            raise AdminError(
                errors.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
            ) from None
        node_id = broker.cluster.node_id
        if wanted != node_id:
            raise AdminError(
                errors.INVALID_REQUEST,
                f"Unexpected broker id, expected {node_id}, but received {name}",
            )
    if config_names:
        raise AdminError(
            errors.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(" + ", ".join(config_names) + ")",
        )


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
        elif resource.resource_type == BROKER:
            _refuse_broker(broker, name, config_names)
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
