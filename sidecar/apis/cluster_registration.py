"""What UnregisterBroker and UnregisterController share: dropping a sidecar's live
registration from the registry in Redis (lua/brokers.lua), after ALTER on the
cluster is checked."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

DENIED_MESSAGE = "Cluster authorization failed."


def answer(api_key: int, request: Any, code: int, message: str | None) -> bytes:
    data = {"throttle_time": 0, "error_code": code, "error_message": message}
    return encode_response(api_key, request.header.api_version, data)


def may_alter_cluster(broker: Broker, request: Any) -> bool:
    return checks.cluster_allowed(broker, request, Operation.ALTER)


async def unregister(broker: Broker, node_id: int) -> bool:
    """Drop `node_id`'s live registration (False: none), then re-read the live sidecars
    so this sidecar's Metadata leaves it out at once. A live sidecar so dropped
    registers again at its next renewal, as a Kafka broker does, taking its group and
    transaction leases up again only then."""
    dropped = await broker.cluster.registry.unregister(node_id)
    await broker.cluster.refresh()
    return dropped
