"""ConsumerGroupDescribe (key 69), v0-v1: a KIP-848 consumer group's state, epochs,
assignor and members with their subscriptions, current and target assignments, from
the coordinating sidecar. A classic group is GROUP_ID_NOT_FOUND ("not a consumer
group"), as from Kafka; admin clients then fall back to DescribeGroups.
Needs DESCRIBE on each group and on the topics its members use (else GROUP_ or
TOPIC_AUTHORIZATION_FAILED for the group), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups import describe_access
from sidecar.groups.consumer_group import Assignment
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # MemberType (v1); classic: a mixed group's


def _failed(group_id: str, code: str, message: str | None) -> dict[str, Any]:
    return {
        "error_code": errors.code(code),
        "error_message": message,
        "group_id": group_id,
        "group_state": "Dead" if code == "GROUP_ID_NOT_FOUND" else "",
        "group_epoch": -1 if code == "GROUP_ID_NOT_FOUND" else 0,
        "assignment_epoch": -1 if code == "GROUP_ID_NOT_FOUND" else 0,
        "assignor_name": "",
        "members": [],
    }


async def _assignment(broker: Broker, assignment: Assignment) -> dict[str, Any]:
    parts = []
    for name, partitions in sorted(assignment.items()):
        info = await broker.store.get_topic(name)
        if info is not None:
            parts.append({"topic_id": info.topic_id, "topic_name": name, "partitions": partitions})
    return {"topic_partitions": parts}


async def describe_one(broker: Broker, group_id: str) -> dict[str, Any]:
    try:
        group = await broker.groups.describe(group_id)
    except CoordinatorError as exc:
        return _failed(group_id, exc.code, None)
    if group is not None and group.streams is not None:
        # Kafka 4.4 gives a streams group no state and no epochs here.
        return {
            **_failed(group_id, "GROUP_ID_NOT_FOUND", f"Group {group_id} is not a consumer group."),
            "group_state": "",
            "group_epoch": 0,
            "assignment_epoch": 0,
        }
    if group is None or group.consumer is None:
        message = f"Group {group_id} not found." if group is None else None
        if group is not None:
            message = f"Group {group_id} is not a consumer group."
        return _failed(group_id, "GROUP_ID_NOT_FOUND", message)
    cg = group.consumer
    members = []
    for m in cg.members.values():
        members.append(
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": sorted(m.topics),
                "subscribed_topic_regex": m.regex,
                "assignment": await _assignment(broker, m.assigned),
                "target_assignment": await _assignment(broker, cg.target.get(m.member_id, {})),
                "member_type": CONSUMER_MEMBER if m.classic is None else CLASSIC_MEMBER,
            }
        )
    return {
        "error_code": errors.NONE,
        "group_id": group_id,
        "group_state": cg.state,
        "group_epoch": cg.epoch,
        "assignment_epoch": cg.assignment_epoch,
        "assignor_name": cg.assignor(),
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
