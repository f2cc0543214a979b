"""The authorization ConsumerGroupDescribe (69) and ShareGroupDescribe (77) share, as
Kafka's: DESCRIBE on the group, and on every topic its members subscribe to or are
assigned (else TOPIC_AUTHORIZATION_FAILED for the group); the group's authorized
operations when asked for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from sidecar.broker import Broker
from sidecar.security import checks
from sidecar.security.authorizer import Operation

Failed = Callable[[str, str, str | None], dict[str, Any]]


async def authorized_entry(
    broker: Broker,
    request: Any,
    group_id: str,
    describe_one: Callable[[Broker, str], Awaitable[dict[str, Any]]],
    failed: Failed,
) -> dict[str, Any]:
    """The group's entry from describe_one, or failed(group_id, code, message)."""
    if not checks.group_allowed(broker, request, Operation.DESCRIBE, group_id):
        return failed(group_id, "GROUP_AUTHORIZATION_FAILED", None)
    entry = await describe_one(broker, group_id)
    topics = {t for m in entry["members"] for t in m["subscribed_topic_names"]} | {
        tp["topic_name"] for m in entry["members"] for tp in m["assignment"]["topic_partitions"]
    }
    if topics - checks.allowed_topics(broker, request, Operation.DESCRIBE, topics):
        message = "The described group uses topics that the client is not authorized to describe."
        return failed(group_id, "TOPIC_AUTHORIZATION_FAILED", message)
    if request.body.include_authorized_operations:
        entry["authorized_operations"] = checks.authorized_operations(
            broker, request, checks.GROUP, group_id
        )
    return entry
