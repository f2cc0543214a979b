"""Retriable answers of the share-group APIs while Redis is unavailable (registered in
apis/unavailable.py's BUILDERS): COORDINATOR_NOT_AVAILABLE for the coordinator's APIs
(heartbeat, describe, offsets), NOT_LEADER_OR_FOLLOWER per partition for ShareFetch
and ShareAcknowledge (the share consumer refreshes metadata and retries; records not
acknowledged stay acquired until their lock expires, as on a broker failure)."""

from __future__ import annotations

from typing import Any

from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response

COORDINATOR_NOT_AVAILABLE = errors.code("COORDINATOR_NOT_AVAILABLE")
NOT_LEADER = errors.code("NOT_LEADER_OR_FOLLOWER")
UNAVAILABLE = "Redis is unavailable"
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def heartbeat(broker: Any, request: Any) -> bytes:
    return encode_response(
        76,
        request.header.api_version,
        {
            "throttle_time": 0,
            "error_code": COORDINATOR_NOT_AVAILABLE,
            "error_message": UNAVAILABLE,
            "member_id": request.body.member_id,
            "member_epoch": 0,
            "heartbeat_interval": 0,
        },
    )


def describe(broker: Any, request: Any, api_key: int = 77) -> bytes:
    """ShareGroupDescribe's (77) answer, or ConsumerGroupDescribe's (69): same shape."""
    groups = [
        {
            "error_code": COORDINATOR_NOT_AVAILABLE,
            "error_message": UNAVAILABLE,
            "group_id": g,
            "group_state": "",
            "group_epoch": 0,
            "assignment_epoch": 0,
            "assignor_name": "",
            "members": [],
        }
        for g in request.body.group_ids
    ]
    return encode_response(
        api_key, request.header.api_version, {"throttle_time": 0, "groups": groups}
    )


def _partitions(api_key: int, request: Any) -> bytes:
    fetch = api_key == 78
    responses = []
    for t in request.body.topics:
        parts = []
        for p in t.partitions:
            e: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": NOT_LEADER,
                "error_message": UNAVAILABLE,
                "current_leader": NO_LEADER,
            }
            if fetch:
                e |= {"acknowledge_error_code": NOT_LEADER, "records": b"", "acquired_records": []}
            parts.append(e)
        responses.append({"topic_id": t.topic_id, "partitions": parts})
    return encode_response(
        api_key,
        request.header.api_version,
        {
            "throttle_time": 0,
            "error_code": errors.NONE,
            "acquisition_lock_timeout": 0,
            "responses": responses,
            "node_endpoints": [],
        },
    )


def share_fetch(broker: Any, request: Any) -> bytes:
    return _partitions(78, request)


def share_acknowledge(broker: Any, request: Any) -> bytes:
    return _partitions(79, request)


def describe_offsets(broker: Any, request: Any) -> bytes:
    groups = [
        {
            "group_id": g.group_id,
            "topics": [],
            "error_code": COORDINATOR_NOT_AVAILABLE,
            "error_message": UNAVAILABLE,
        }
        for g in request.body.groups
    ]
    return encode_response(90, request.header.api_version, {"throttle_time": 0, "groups": groups})


def alter_offsets(broker: Any, request: Any) -> bytes:
    return encode_response(
        91,
        request.header.api_version,
        {
            "throttle_time": 0,
            "error_code": COORDINATOR_NOT_AVAILABLE,
            "error_message": UNAVAILABLE,
            "responses": [],
        },
    )


def delete_offsets(broker: Any, request: Any) -> bytes:
    return encode_response(
        92,
        request.header.api_version,
        {
            "throttle_time": 0,
            "error_code": COORDINATOR_NOT_AVAILABLE,
            "error_message": UNAVAILABLE,
            "responses": [],
        },
    )


BUILDERS = {
    76: heartbeat,
    77: describe,
    78: share_fetch,
    79: share_acknowledge,
    90: describe_offsets,
    91: alter_offsets,
    92: delete_offsets,
}
