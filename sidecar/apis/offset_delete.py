"""OffsetDelete (key 47), v0: delete committed offsets of partitions the group does
not consume (GROUP_SUBSCRIBED_TO_TOPIC for those it does).
Needs DELETE on the group (else GROUP_AUTHORIZATION_FAILED) and READ on each topic
(else TOPIC_AUTHORIZATION_FAILED per partition), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.apis.partition_errors import topic_partition_errors
from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    results: dict[tuple[str, int], str] = {}
    known: list[tuple[str, int]] = []
    readable = checks.allowed_topics(broker, request, Operation.READ, (t.name for t in body.topics))
    for topic in body.topics:
        info = await broker.store.get_topic(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                results[tp] = "TOPIC_AUTHORIZATION_FAILED"
            elif info is None or not 0 <= p.partition_index < info.partitions:
                results[tp] = "UNKNOWN_TOPIC_OR_PARTITION"
            else:
                known.append(tp)
    try:
        if not checks.group_allowed(broker, request, Operation.DELETE, body.group_id):
            raise CoordinatorError("GROUP_AUTHORIZATION_FAILED")
        top, per_partition = (
            await broker.groups.delete_offsets(body.group_id, known)
            if body.group_id
            else ("INVALID_GROUP_ID", {})
        )
    except CoordinatorError as exc:
        top, per_partition = exc.code, {}
    results.update(per_partition)
    topics = topic_partition_errors(body.topics, results) if top == "NONE" else []
    return encode_response(
        API_KEY,
        request.header.api_version,
        {"error_code": errors.code(top), "throttle_time": 0, "topics": topics},
    )
