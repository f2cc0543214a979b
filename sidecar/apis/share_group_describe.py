"""ShareGroupDescribe (key 77), v1: a share group's state, epoch and members with
their subscriptions and assignments, from the coordinating sidecar.
Needs DESCRIBE on each group and on the topics its members use (else GROUP_ or
TOPIC_AUTHORIZATION_FAILED for the group), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups import describe_access
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.share import state

API_KEY = 77
MIN_VERSION = 1
MAX_VERSION = 1


def _failed(group_id: str, code: str, message: str | None) -> dict[str, Any]:
    return {
        "error_code": errors.code(code),
        "error_message": message,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": 0,
        "assignment_epoch": 0,
        "assignor_name": "",
        "members": [],
    }


async def describe_one(broker: Broker, group_id: str) -> dict[str, Any]:
    try:
        group = await state(broker).coordinator.describe(group_id)
    except CoordinatorError as exc:
        message = (
            f"Group {group_id} is not a share group." if exc.code == "GROUP_ID_NOT_FOUND" else None
        )
        return _failed(group_id, exc.code, message)
    if group is None:
        return _failed(group_id, "GROUP_ID_NOT_FOUND", f"Group {group_id} not found.")
    members = [
        {
            "member_id": m.member_id,
            "rack_id": m.rack_id,
            "member_epoch": m.epoch,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": sorted(m.topics),
            "assignment": {
                "topic_partitions": [
                    {"topic_id": tid, "topic_name": name, "partitions": parts}
                    for tid, name, parts in m.assignment
                ]
            },
        }
        for m in group.members.values()
    ]
    return {
        "error_code": errors.NONE,
        "group_id": group_id,
        "group_state": group.state,
        "group_epoch": group.epoch,
        "assignment_epoch": group.epoch,
        "assignor_name": "simple",
        "members": members,
    }


async def handle(broker: Broker, request: Any) -> bytes:
    groups = [
        await describe_access.authorized_entry(broker, request, g, describe_one, _failed)
        for g in request.body.group_ids
    ]
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "groups": groups}
    )
