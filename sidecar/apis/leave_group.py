"""LeaveGroup (key 13), v0-v5: one member (v0-v2) or a batch of members by member id
or group instance id (v3+) leave; the rest of the group rebalances.
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    if version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [(body.member_id, None)]
    if not checks.group_allowed(broker, request, Operation.READ, body.group_id):
        # Kafka's error response: the top-level code and no member results.
        top, member_errors, leaving = "GROUP_AUTHORIZATION_FAILED", [], []
    elif not body.group_id:
        top, member_errors = "INVALID_GROUP_ID", []
    else:
        try:
            top, member_errors = await broker.groups.leave(body.group_id, leaving)
        except CoordinatorError as exc:
            top, member_errors = exc.code, []
    if version < 3 and top == "NONE" and member_errors:
        top = member_errors[0]  # the single member's error is the answer
    return encode_response(
        API_KEY,
        version,
        {
            "throttle_time": 0,
            "error_code": errors.code(top),
            "members": [
                {"member_id": m, "group_instance_id": i, "error_code": errors.code(e)}
                for (m, i), e in zip(leaving, member_errors, strict=False)
            ],
        },
    )
