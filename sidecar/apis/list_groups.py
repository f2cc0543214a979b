"""ListGroups (key 16), v0-v5: the groups this sidecar coordinates (admin clients ask
every broker and merge, as with Kafka), classic, consumer (KIP-848), streams (KIP-1071)
and share groups (sidecar/share/), filtered by state (v4+) and type (v5+).
Lists every group to a principal that may DESCRIBE the cluster, else the groups it may
DESCRIBE (no error), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share import state

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    states = {s.lower() for s in getattr(body, "states_filter", ())}
    types = {t.lower() for t in getattr(body, "types_filter", ())}
    groups: list[dict[str, Any]] = []
    for group in await broker.groups.listed():
        if group.streams is not None:
            kind, state_name = "streams", group.streams.state
        elif group.consumer is not None:
            kind, state_name = "consumer", group.consumer.state
        else:
            kind, state_name = "classic", group.state.value
        if states and state_name.lower() not in states:
            continue
        if types and kind not in types:
            continue
        groups.append(
            {
                "group_id": group.group_id,
                "protocol_type": group.protocol_type or "",
                "group_state": state_name,
                "group_type": kind,
            }
        )
    if not types or "share" in types:
        for sg in await state(broker).coordinator.listed():
            if states and sg.state.lower() not in states:
                continue
            groups.append(
                {
                    "group_id": sg.group_id,
                    "protocol_type": "share",
                    "group_state": sg.state,
                    "group_type": "share",
                }
            )
    if not checks.cluster_allowed(broker, request, Operation.DESCRIBE):
        # Kafka: without DESCRIBE on the cluster, only the groups one may DESCRIBE.
        groups = [
            g
            for g in groups
            if checks.group_allowed(broker, request, Operation.DESCRIBE, g["group_id"])
        ]
    groups.sort(key=lambda g: g["group_id"])
    return encode_response(
        API_KEY,
        request.header.api_version,
        {"throttle_time": 0, "error_code": errors.NONE, "groups": groups},
    )
