"""ShareGroupHeartbeat (key 76), v1: join (epoch 0), stay (the member's epoch), leave
(epoch -1) a share group, and receive the assignment (sidecar/share/membership.py)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.share import state

API_KEY = 76
MIN_VERSION = 1
MAX_VERSION = 1


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    topics = body.subscribed_topic_names
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
        "heartbeat_interval": broker.settings.group_share_heartbeat_interval_ms,
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
