"""UnregisterController (key 94), v0: `kafka-cluster unregister-controller --id N`.
Every sidecar is a controller as well as a broker (DescribeQuorum lists them all as
voters), so N is a live sidecar or no controller. As Kafka 4.4: the active controller
(the lowest live node id) is refused with INVALID_REQUEST; another live sidecar's
registration is dropped (it registers again at its next heartbeat, see
UnregisterBroker); any other id is CONTROLLER_ID_NOT_REGISTERED (136, newer than
kio's error table). Needs ALTER on the cluster."""

from __future__ import annotations

from typing import Any

from sidecar.apis import cluster_registration
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.security import checks

API_KEY = 94
MIN_VERSION = 0
MAX_VERSION = 0

CONTROLLER_ID_NOT_REGISTERED = 136


def response(request: Any, code: int, message: str | None) -> bytes:
    return cluster_registration.answer(API_KEY, request, code, message)


async def handle(broker: Broker, request: Any) -> bytes:
    if not cluster_registration.may_alter_cluster(broker, request):
        denied = cluster_registration.DENIED_MESSAGE
        return response(request, checks.CLUSTER_AUTHORIZATION_FAILED, denied)
    node_id = request.body.controller_id
    await broker.cluster.refresh()  # which sidecar is active now, not a heartbeat ago
    if broker.cluster.brokers()[0].node_id == node_id:
        message = "Controller cannot unregister itself while it is active."
        return response(request, errors.INVALID_REQUEST, message)
    if await cluster_registration.unregister(broker, node_id):
        return response(request, errors.NONE, "")
    message = f"Controller ID {node_id} is not currently registered."
    return response(request, CONTROLLER_ID_NOT_REGISTERED, message)
