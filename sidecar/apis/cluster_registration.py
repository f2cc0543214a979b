"""What UnregisterBroker and UnregisterController share: dropping a sidecar's live
registration from the registry in Redis (lua/brokers.lua), after ALTER on the
cluster is checked (else CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

DENIED_MESSAGE = "Cluster authorization failed."


def answer(api_key: int, request: Any, code: int, message: str | None) -> bytes:
    data = {"throttle_time": 0, "error_code": code, "error_message": message}
    return encode_response(api_key, request.header.api_version, data)


async def handle(
    broker: Broker,
    request: Any,
    api_key: int,
    node_id: int,
    not_registered: tuple[int, str],
    spare_active: bool = False,
) -> bytes:
    """Drop `node_id`'s registration: NONE, or `not_registered` (code, message) when no
    live sidecar holds the id. `spare_active`: refuse the active controller (the lowest
    live node id), as Kafka's controller refuses to unregister itself."""
    if not checks.cluster_allowed(broker, request, Operation.ALTER):
        return answer(api_key, request, checks.CLUSTER_AUTHORIZATION_FAILED, DENIED_MESSAGE)
    if spare_active:
        await broker.cluster.refresh()  # which sidecar is active now, not a heartbeat ago
        if broker.cluster.brokers()[0].node_id == node_id:
            message = "Controller cannot unregister itself while it is active."
            return answer(api_key, request, errors.INVALID_REQUEST, message)
    if await unregister(broker, node_id):
        return answer(api_key, request, errors.NONE, "")
    return answer(api_key, request, *not_registered)


async def unregister(broker: Broker, node_id: int) -> bool:
    """Drop `node_id`'s live registration (False: none), then re-read the live sidecars
    so this sidecar's Metadata leaves it out at once. A live sidecar so dropped
    registers again at its next renewal, as a Kafka broker does, taking its group and
    transaction leases up again only then."""
    dropped = await broker.cluster.registry.unregister(node_id)
    await broker.cluster.refresh()
    return dropped
