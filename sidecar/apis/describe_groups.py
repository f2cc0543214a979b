"""DescribeGroups (key 15), v0-v6: state, protocol and members of groups. Member
metadata is given only for a Stable group, and each member's last assignment in every
state, as Kafka 4 does (Kafka 3 gave assignments only for a Stable group). Groups are
answered in request order (Kafka 4: grouped by __consumer_offsets partition). An
unknown group, and a KIP-848 consumer group (not a classic group), is reported as Dead:
with no error up to v5, with GROUP_ID_NOT_FOUND and Kafka's message from v6 (KIP-1043).
Needs DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED for it); its authorized
operations come from the authorizer, as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.groups.state import State
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.queues.core import queue_store
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6


def _not_found(entry: dict[str, Any], version: int, message: str) -> dict[str, Any]:
    if version < 6:
        return entry
    # Kafka 4 gives a group it could not describe no authorized operations.
    return {
        **entry,
        "error_code": errors.code("GROUP_ID_NOT_FOUND"),
        "error_message": message,
        "authorized_operations": checks.NOT_REQUESTED,
    }


async def _describe(
    broker: Broker, request: Any, group_id: str, with_ops: bool, version: int
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "error_code": errors.NONE,
        "group_id": group_id,
        "group_state": State.DEAD.value,
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": checks.NOT_REQUESTED,
    }
    if not checks.group_allowed(broker, request, Operation.DESCRIBE, group_id):
        return {**entry, "error_code": checks.GROUP_AUTHORIZATION_FAILED, "group_state": ""}
    if with_ops:
        entry["authorized_operations"] = checks.authorized_operations(
            broker, request, checks.GROUP, group_id
        )
    if await queue_store(broker).exists(group_id):
        # A queue group has no classic members: Empty, as a group of standalone
        # consumers, so kafka-consumer-groups --describe shows its offsets and lag.
        entry["group_state"] = State.EMPTY.value
        return entry
    try:
        group = await broker.groups.describe(group_id)
    except CoordinatorError as exc:
        entry["error_code"] = errors.code(exc.code)
        entry["group_state"] = ""
        return entry
    if group is None:
        return _not_found(entry, version, f"Group {group_id} not found.")
    if group.consumer is not None or group.streams is not None:
        # Admin clients describe it with ConsumerGroupDescribe or StreamsGroupDescribe.
        return _not_found(entry, version, f"Group {group_id} is not a classic group.")
    stable = group.state == State.STABLE
    entry["group_state"] = group.state.value
    entry["protocol_type"] = group.protocol_type or ""
    entry["protocol_data"] = (group.protocol or "") if stable else ""
    entry["members"] = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "member_metadata": m.metadata(group.protocol) if stable else b"",
            # Kafka 4's describeNoMetadata keeps the member's last assignment (3.x
            # left it out outside Stable); a rebalance's failed sync clears it.
            "member_assignment": m.assignment,
        }
        for m in group.members.values()
    ]
    return entry


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    with_ops = bool(getattr(body, "include_authorized_operations", False))
    version = request.header.api_version
    groups = [await _describe(broker, request, g, with_ops, version) for g in body.groups]
    return encode_response(API_KEY, version, {"throttle_time": 0, "groups": groups})
