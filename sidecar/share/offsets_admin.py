"""What AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) share: Kafka's
top-level answer, and the checks before either touches a group (the group ACL, a
non-empty id, the group's coordinator)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share import state


def answer(
    api_key: int, version: int, code: str, message: str | None, responses: list[Any]
) -> bytes:
    return encode_response(
        api_key,
        version,
        {
            "throttle_time": 0,
            "error_code": errors.code(code),
            "error_message": message,
            "responses": responses,
        },
    )


async def coordinated_group(
    broker: Broker, request: Any, api_key: int, operation: Operation, create: bool
) -> tuple[Any, bytes | None]:
    """(the group, or None if it does not exist and create is false; None) or
    (None, the refusal to send)."""
    version = request.header.api_version
    group_id = request.body.group_id
    if not checks.group_allowed(broker, request, operation, group_id):
        refusal = ("GROUP_AUTHORIZATION_FAILED", "Group authorization failed.")
        return None, answer(api_key, version, *refusal, [])
    if not group_id:
        return None, answer(api_key, version, "INVALID_GROUP_ID", "The group id is empty.", [])
    try:
        return await state(broker).coordinator.coordinate(group_id, create=create), None
    except CoordinatorError as exc:
        return None, answer(api_key, version, exc.code, None, [])
