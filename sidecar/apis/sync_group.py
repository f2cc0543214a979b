"""SyncGroup (key 14), v0-v5: the leader hands in the assignment; every member gets
its own part once the leader's arrives."""

from __future__ import annotations

from typing import Any

from ..broker import Broker
from ..groups.coordinator import CoordinatorError
from ..groups.state import SyncResult
from ..protocol import errors
from ..protocol.kio_codec import encode_response

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def _sync(broker: Broker, body: Any) -> SyncResult:
    if not body.group_id:
        return SyncResult("INVALID_GROUP_ID")
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
    result = await _sync(broker, request.body)
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
