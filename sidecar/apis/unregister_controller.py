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

API_KEY = 94
MIN_VERSION = 0
MAX_VERSION = 0

CONTROLLER_ID_NOT_REGISTERED = 136


def response(request: Any, code: int, message: str | None) -> bytes:
    return cluster_registration.answer(API_KEY, request, code, message)


async def handle(broker: Broker, request: Any) -> bytes:
    node_id = request.body.controller_id
    message = f"Controller ID {node_id} is not currently registered."
    not_registered = (CONTROLLER_ID_NOT_REGISTERED, message)
    return await cluster_registration.handle(
        broker, request, API_KEY, node_id, not_registered, spare_active=True
    )
