"""Heartbeat (key 12), v0-v4: keeps a member's session alive and tells it when the
group rebalances (REBALANCE_IN_PROGRESS).
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    if not checks.group_allowed(broker, request, Operation.READ, body.group_id):
        error = "GROUP_AUTHORIZATION_FAILED"
    elif not body.group_id:
        error = "INVALID_GROUP_ID"
    else:
        try:
            error = await broker.groups.heartbeat(
                body.group_id,
                body.member_id,
                getattr(body, "group_instance_id", None),
                body.generation_id,
            )
        except CoordinatorError as exc:
            error = exc.code
    return encode_response(
        API_KEY,
        request.header.api_version,
        {"throttle_time": 0, "error_code": errors.code(error)},
    )
