"""ShareGroupHeartbeat (key 76), v1: join (epoch 0), stay (the member's epoch), leave
(epoch -1) a share group, and receive the assignment (sidecar/share/membership.py).
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every
subscribed topic (else TOPIC_AUTHORIZATION_FAILED); denied, the membership is unchanged."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups.group_configs import SHARE_HEARTBEAT
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share import state

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


def _denied(
    broker: Broker, request: Any, group_id: str, topics: Any
) -> tuple[int, str | None] | None:
    if not checks.group_allowed(broker, request, Operation.READ, group_id):
        return checks.GROUP_AUTHORIZATION_FAILED, None
    if topics:
        hidden = set(topics) - checks.allowed_topics(broker, request, Operation.DESCRIBE, topics)
        if hidden:
            names = ", ".join(sorted(hidden))
            return checks.TOPIC_AUTHORIZATION_FAILED, f"Unauthorized topics: {names}"
    return None


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    topics = body.subscribed_topic_names
    denied = _denied(broker, request, body.group_id, topics)
    if denied is not None:
        code, message = denied
        return encode_response(
            API_KEY,
            request.header.api_version,
            {
                "throttle_time": 0,
                "error_code": code,
                "error_message": message,
                "member_id": None,
                "member_epoch": 0,
                "heartbeat_interval": 0,
                "assignment": None,
            },
        )
    result = await state(broker).coordinator.heartbeat(
        body.group_id,
        body.member_id,
        body.member_epoch,
        body.rack_id,
        list(topics) if topics is not None else None,
        request.header.client_id or "",
        f"/{request.peer_host}",
    )
    data: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": errors.code(result.error),
        "error_message": result.message,
        "member_id": result.member_id,
        "member_epoch": result.epoch,
        "heartbeat_interval": broker.groups.configs.get(  # share.heartbeat.interval.ms
            body.group_id, SHARE_HEARTBEAT, broker.settings.group_share_heartbeat_interval_ms
        ),
        "assignment": None,
    }
    if result.error == "NONE" and result.assignment is not None:
        data["assignment"] = {
            "topic_partitions": [
                {"topic_id": tid, "partitions": parts} for tid, _, parts in result.assignment
            ]
        }
    if result.error != "NONE":
        data["member_epoch"] = 0
        data["heartbeat_interval"] = 0
    return encode_response(API_KEY, request.header.api_version, data)
