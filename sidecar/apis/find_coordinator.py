"""FindCoordinator (key 10), v0-v4: which sidecar coordinates a group (v4: many keys).

A group's coordinator is the live sidecar holding its lease in Redis; a group nobody
holds goes to the live sidecar its id hashes to, which claims the lease on the
group's first request. Transactional ids hash the same way."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.storage.registry import BrokerInfo

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 4

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


async def _entry(
    broker: Broker, key: str, key_type: int, ok_message: str, listener: str
) -> dict[str, Any]:
    if key_type not in (GROUP, TRANSACTION):
        return {
            "key": key,
            "error_code": errors.INVALID_REQUEST,
            "error_message": f"Invalid coordinator type {key_type}",
            "node_id": -1,
            "host": "",
            "port": -1,
        }
    # At its address on the listener the client came in on.
    node = (await coordinator_for(broker, key, key_type)).on(listener)
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
    listener = request.security.listener
    if version >= 4:
        entries = [
            await _entry(broker, key, key_type, "", listener) for key in body.coordinator_keys
        ]
        data: dict[str, Any] = {"throttle_time": 0, "coordinators": entries}
    else:
        # Kafka's error message on success: "NONE" before v4, "" per key from v4.
        data = {"throttle_time": 0, **await _entry(broker, body.key, key_type, "NONE", listener)}
    return encode_response(API_KEY, version, data)
