"""ShareAcknowledge (key 79), v1-v2: accept (1), release (2), reject (3) or renew (4,
v2 with IsRenewAck) records acquired through ShareFetch, inside the member's share
session on this sidecar (epoch 0 is not allowed here; -1 acknowledges and closes the
session, releasing the member's other acquired records).
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED, nothing done) and READ on
each topic (else TOPIC_AUTHORIZATION_FAILED per partition), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share import records, state
from sidecar.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, SessionError

API_KEY = 79
MIN_VERSION = 1
MAX_VERSION = 2

NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def _answer(
    version: int, code: str, message: str | None, responses: list[Any], lock_ms: int
) -> bytes:
    return encode_response(
        API_KEY,
        version,
        {
            "throttle_time": 0,
            "error_code": errors.code(code),
            "error_message": message,
            "acquisition_lock_timeout": lock_ms,
            "responses": responses,
            "node_endpoints": [],
        },
    )


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    version = request.header.api_version
    group_id, member_id, epoch = body.group_id or "", body.member_id or "", body.share_session_epoch
    if not checks.group_allowed(broker, request, Operation.READ, group_id):
        return _answer(version, "GROUP_AUTHORIZATION_FAILED", None, [], 0)
    if not group_id:
        return _answer(version, "INVALID_REQUEST", "Group ID is required.", [], 0)
    if not member_id:
        return _answer(version, "INVALID_REQUEST", "Member ID is required.", [], 0)
    share = state(broker)
    try:
        if epoch == INITIAL_EPOCH:
            raise SessionError(
                "INVALID_SHARE_SESSION_EPOCH", "Acknowledge request with share session epoch 0."
            )
        if epoch == FINAL_EPOCH:
            if share.sessions.get(group_id, member_id) is None:
                raise SessionError(
                    "SHARE_SESSION_NOT_FOUND", f"Share session for member {member_id} not found."
                )
        else:
            share.sessions.advance(group_id, member_id, epoch)
    except SessionError as exc:
        return _answer(version, exc.code, exc.message, [], 0)
    responses = []
    for t in body.topics:
        info = await broker.store.topic_by_id(t.topic_id)
        parts = []
        for p in t.partitions:
            e: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": errors.NONE,
                "current_leader": NO_LEADER,
            }
            if info is not None and not checks.topic_allowed(
                broker, request, Operation.READ, info.name
            ):
                e["error_code"] = checks.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                e["error_code"] = errors.code(
                    "UNKNOWN_TOPIC_ID" if info is None else "UNKNOWN_TOPIC_OR_PARTITION"
                )
            else:
                ack = await records.acknowledge(
                    broker,
                    group_id,
                    member_id,
                    info.name,
                    p.partition_index,
                    p.acknowledgement_batches,
                    allow_renew=version >= 2,
                )
                e["error_code"], e["error_message"] = ack.error, ack.message
            parts.append(e)
        responses.append({"topic_id": t.topic_id, "partitions": parts})
    if epoch == FINAL_EPOCH:
        closed = share.sessions.close(group_id, member_id)
        if closed is not None:  # the member's records on the session's partitions go back
            await share.close_session(closed)
    return _answer(version, "NONE", None, responses, await records.lock_ms(broker, group_id))
