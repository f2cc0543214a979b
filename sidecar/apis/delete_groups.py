"""DeleteGroups (key 42), v0-v3: delete empty groups with their committed offsets;
share (queue) groups are deleted by sidecar/share/membership.py.
Needs DELETE on each group (else GROUP_AUTHORIZATION_FAILED for it, without a
message), as in Kafka. v3 adds a message where Kafka's coordinator gives one."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.queues.core import queue_store
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share import state

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 3

# Kafka 4.4's coordinator answers a group's own refusal (NON_EMPTY_GROUP,
# GROUP_ID_NOT_FOUND) with a code alone, and a failure of its coordinator with the
# exception's message (ApiError.fromThrowable: the error's default message here).
_MESSAGES = {
    errors.code("NOT_COORDINATOR"): "This is not the correct coordinator.",
    errors.code("COORDINATOR_NOT_AVAILABLE"): "The coordinator is not available.",
    errors.code("COORDINATOR_LOAD_IN_PROGRESS"): (
        "The coordinator is loading and hence can't process requests."
    ),
}


def refusal_message(error_code: int) -> str | None:
    return _MESSAGES.get(error_code)


async def _delete(broker: Broker, request: Any, group_id: str) -> int:
    if not checks.group_allowed(broker, request, Operation.DELETE, group_id):
        return checks.GROUP_AUTHORIZATION_FAILED
    try:
        if await queue_store(broker).exists(group_id):  # a share/queue group
            return errors.code(await state(broker).coordinator.delete(group_id))
        return errors.code(await broker.groups.delete_group(group_id))
    except CoordinatorError as exc:
        return errors.code(exc.code)


async def handle(broker: Broker, request: Any) -> bytes:
    results = []
    for group_id in request.body.groups_names:
        error_code = await _delete(broker, request, group_id)
        results.append(
            {
                "group_id": group_id,
                "error_code": error_code,
                "error_message": refusal_message(error_code),
            }
        )
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "results": results}
    )
