"""DeleteGroups (key 42), v0-v2: delete empty groups with their committed offsets;
share (queue) groups are deleted by sidecar/share/membership.py.
Needs DELETE on each group (else GROUP_AUTHORIZATION_FAILED for it), as in Kafka."""

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
MAX_VERSION = 2


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
    return encode_response(
        API_KEY,
        request.header.api_version,
        {
            "throttle_time": 0,
            "results": [
                {"group_id": g, "error_code": await _delete(broker, request, g)}
                for g in request.body.groups_names
            ],
        },
    )
