"""JoinGroup (key 11), v0-v9: join a consumer group or rejoin it for a rebalance.
The answer may wait until the rebalance completes (groups/coordinator.py).
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.apis.consumer_group_heartbeat import partition_counter
from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError, JoinRequest
from sidecar.groups.state import JoinResult
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response, ms
from sidecar.queues.core import queue_store
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


async def _join(broker: Broker, request: Any) -> JoinResult:
    version = request.header.api_version
    body = request.body
    settings = broker.settings
    session_ms = ms(body.session_timeout)
    if not checks.group_allowed(broker, request, Operation.READ, body.group_id):
        return JoinResult("GROUP_AUTHORIZATION_FAILED", "")
    if not body.group_id:
        return JoinResult("INVALID_GROUP_ID", body.member_id)
    if await queue_store(broker).exists(body.group_id):
        # A queue (share) group: Kafka answers a classic join so (GroupMetadataManager).
        return JoinResult("INCONSISTENT_GROUP_PROTOCOL", "")
    if not (
        settings.group_min_session_timeout_ms <= session_ms <= settings.group_max_session_timeout_ms
    ):
        return JoinResult("INVALID_SESSION_TIMEOUT", body.member_id)
    join = JoinRequest(
        member_id=body.member_id,
        instance_id=getattr(body, "group_instance_id", None),
        client_id=request.header.client_id or "",
        client_host=f"/{request.peer_host}",
        session_timeout_ms=session_ms,
        # v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms=ms(body.rebalance_timeout) if version >= 1 else session_ms,
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
        partition_counts=partition_counter(broker),
    )
    try:
        return await broker.groups.join(body.group_id, join)
    except CoordinatorError as exc:
        return JoinResult(exc.code, body.member_id)


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    result = await _join(broker, request)
    return encode_response(
        API_KEY,
        version,
        {
            "throttle_time": 0,
            "error_code": errors.code(result.error),
            "generation_id": result.generation,
            "protocol_type": result.protocol_type,
            # Before v7 the protocol name is not nullable: Kafka sends "".
            "protocol_name": result.protocol if result.protocol or version >= 7 else "",
            "leader": result.leader,
            "skip_assignment": result.skip_assignment,
            "member_id": result.member_id,
            "members": [
                {"member_id": m, "group_instance_id": i, "metadata": meta}
                for m, i, meta in result.members
            ],
        },
    )
