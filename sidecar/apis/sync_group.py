"""SyncGroup (key 14), v0-v5: the leader hands in the assignment; every member gets
its own part once the leader's arrives.
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.groups.state import SyncResult
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def _sync(broker: Broker, request: Any) -> SyncResult:
    body, version = request.body, request.header.api_version
    if not checks.group_allowed(broker, request, Operation.READ, body.group_id):
        return SyncResult("GROUP_AUTHORIZATION_FAILED")
    if not body.group_id:
        return SyncResult("INVALID_GROUP_ID")
    if version >= 5 and (body.protocol_type is None or body.protocol_name is None):
        return SyncResult("INCONSISTENT_GROUP_PROTOCOL")  # mandatory from v5, as in Kafka
    try:
        return await broker.groups.sync(
            body.group_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
            body.generation_id,
            getattr(body, "protocol_type", None),
            getattr(body, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in body.assignments},
        )
    except CoordinatorError as exc:
        return SyncResult(exc.code)


async def handle(broker: Broker, request: Any) -> bytes:
    result = await _sync(broker, request)
    return encode_response(
        API_KEY,
        request.header.api_version,
        {
            "throttle_time": 0,
            "error_code": errors.code(result.error),
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol,
            "assignment": result.assignment,
        },
    )
