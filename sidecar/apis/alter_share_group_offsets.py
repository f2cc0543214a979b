"""AlterShareGroupOffsets (key 91), v0: start a share group's partitions again at
given offsets (the queue core's reset: pending records are dropped). As in Kafka,
only while the group has no members (NON_EMPTY_GROUP otherwise); answered by the
group's coordinator.
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED, nothing done) and READ on
each topic (else TOPIC_AUTHORIZATION_FAILED per partition), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.queues.core import QueueError
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share import offsets_admin
from sidecar.share.records import queues

API_KEY = 91
MIN_VERSION = 0
MAX_VERSION = 0


def _answer(version: int, code: str, message: str | None, responses: list[Any]) -> bytes:
    return offsets_admin.answer(API_KEY, version, code, message, responses)


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    version = request.header.api_version
    group_id = body.group_id
    group, refusal = await offsets_admin.coordinated_group(
        broker, request, API_KEY, Operation.READ, create=True
    )
    if refusal is not None:
        return refusal
    if group is not None and group.members:
        return _answer(version, "NON_EMPTY_GROUP", "The group is not empty.", [])
    core = queues(broker)
    try:
        await core.config(group_id, create=True)
    except QueueError as exc:
        return _answer(version, "INVALID_GROUP_ID", exc.message, [])
    responses = []
    readable = checks.allowed_topics(
        broker, request, Operation.READ, (t.topic_name for t in body.topics)
    )
    for t in body.topics:
        info = await broker.store.get_topic(t.topic_name)
        parts = []
        for p in t.partitions:
            e: dict[str, Any] = {"partition_index": p.partition_index, "error_code": errors.NONE}
            if t.topic_name not in readable:
                e["error_code"] = checks.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                e["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
                e["error_message"] = "This server does not host this topic-partition."
            else:
                try:
                    await core.reset(group_id, t.topic_name, p.partition_index, p.start_offset)
                except QueueError as exc:
                    e["error_code"], e["error_message"] = errors.code(exc.code), exc.message
            parts.append(e)
        responses.append(
            {
                "topic_name": t.topic_name,
                "topic_id": info.topic_id if info else None,
                "partitions": parts,
            }
        )
    return _answer(version, "NONE", None, responses)
