"""FindCoordinator (key 10), v0-v6: which sidecar coordinates a group (v4: many keys).
v6 adds key type 2, a share-group state partition, which only brokers ask for: Skiff
keeps share-group state in Redis and has no share coordinator, so INVALID_REQUEST.

A group's coordinator is the live sidecar holding its lease in Redis; a group nobody
holds goes to the live sidecar its id hashes to, which claims the lease on the
group's first request. Transactional ids hash the same way.
Authorization as Kafka's: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) or on
the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.registry import BrokerInfo

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP, TRANSACTION = 0, 1


async def coordinator_for(broker: Broker, key: str, key_type: int) -> BrokerInfo:
    cluster = broker.cluster
    if key_type == GROUP:
        holder = await broker.groups.store.lease_holder(key)
        if holder is not None:
            live = await cluster.live_holder(holder)
            if live is not None:
                return live
    return cluster.preferred(key)


# Kafka's messages for these errors (its Errors enum).
_DENIED = {
    GROUP: (checks.GROUP_AUTHORIZATION_FAILED, checks.GROUP, "Group authorization failed."),
    TRANSACTION: (
        checks.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        checks.TRANSACTIONAL_ID,
        "Transactional Id authorization failed.",
    ),
}


def _error(key: str, code: int, message: str) -> dict[str, Any]:
    return {
        "key": key,
        "error_code": code,
        "error_message": message,
        "node_id": -1,
        "host": "",
        "port": -1,
    }


async def _entry(
    broker: Broker, request: Any, key: str, key_type: int, ok_message: str
) -> dict[str, Any]:
    if key_type not in (GROUP, TRANSACTION):
        return _error(key, errors.INVALID_REQUEST, f"Invalid coordinator type {key_type}")
    code, resource_type, message = _DENIED[key_type]
    if not checks.allowed(broker, request, Operation.DESCRIBE, resource_type, key):
        return _error(key, code, "" if ok_message == "" else message)
    # At its address on the listener the client came in on.
    node = (await coordinator_for(broker, key, key_type)).on(request.security.listener)
    return {
        "key": key,
        "error_code": errors.NONE,
        "error_message": ok_message,
        "node_id": node.node_id,
        "host": node.host,
        "port": node.port,
    }


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    key_type = int(getattr(body, "key_type", GROUP))
    if version >= 4:
        entries = [
            await _entry(broker, request, key, key_type, "") for key in body.coordinator_keys
        ]
        data: dict[str, Any] = {"throttle_time": 0, "coordinators": entries}
    else:
        # Kafka's error message on success: "NONE" before v4, "" per key from v4.
        data = {"throttle_time": 0, **await _entry(broker, request, body.key, key_type, "NONE")}
    return encode_response(API_KEY, version, data)
