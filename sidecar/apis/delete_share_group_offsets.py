"""DeleteShareGroupOffsets (key 92), v0: forget a share group's state on whole topics
(the queue core's per-partition positions and leases), so that consuming them again
starts at share.auto.offset.reset. As in Kafka, only while the group has no members
(NON_EMPTY_GROUP otherwise) and only for a group that exists (GROUP_ID_NOT_FOUND);
answered by the group's coordinator.
Needs DELETE on the group (else GROUP_AUTHORIZATION_FAILED, nothing done) and READ on
each topic (else TOPIC_AUTHORIZATION_FAILED for that topic), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share import offsets_admin
from sidecar.share.records import queues

API_KEY = 92
MIN_VERSION = 0
MAX_VERSION = 0


def _answer(version: int, code: str, message: str | None, responses: list[Any]) -> bytes:
    return offsets_admin.answer(API_KEY, version, code, message, responses)


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    version = request.header.api_version
    group_id = body.group_id
    group, refusal = await offsets_admin.coordinated_group(
        broker, request, API_KEY, Operation.DELETE, create=False
    )
    if refusal is not None:
        return refusal
    core = queues(broker)
    if group is None and not await core.exists(group_id):
        return _answer(version, "GROUP_ID_NOT_FOUND", f"Group {group_id} not found.", [])
    if group is not None and group.members:
        return _answer(version, "NON_EMPTY_GROUP", "The group is not empty.", [])
    readable = checks.allowed_topics(
        broker, request, Operation.READ, (t.topic_name for t in body.topics)
    )
    responses = []
    for t in body.topics:
        info = await broker.store.get_topic(t.topic_name)
        e: dict[str, Any] = {
            "topic_name": t.topic_name,
            "topic_id": info.topic_id if info else None,
            "error_code": errors.NONE,
        }
        if t.topic_name not in readable:
            e["error_code"] = checks.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            e["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
            e["error_message"] = "This server does not host this topic-partition."
        else:
            await core.forget_topic(group_id, t.topic_name)
        responses.append(e)
    return _answer(version, "NONE", None, responses)
