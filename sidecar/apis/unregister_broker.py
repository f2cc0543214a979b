"""UnregisterBroker (key 64), v0: `kafka-cluster unregister --id N`,
AdminClient.unregisterBroker. Drops sidecar N's registration at once instead of when
its lease runs out (broker.session.timeout.ms): after a SIGKILL, Metadata stops
naming it and its groups move on now. A live sidecar registers again at its next
heartbeat, as a Kafka broker does. Errors as Kafka 4.4's: BROKER_ID_NOT_REGISTERED
for an id no live sidecar holds; CLUSTER_AUTHORIZATION_FAILED without ALTER on the
cluster."""

from __future__ import annotations

from typing import Any

from sidecar.apis import cluster_registration
from sidecar.broker import Broker
from sidecar.protocol import errors

API_KEY = 64
MIN_VERSION = 0
MAX_VERSION = 0

BROKER_ID_NOT_REGISTERED = errors.code("BROKER_ID_NOT_REGISTERED")


def response(request: Any, code: int, message: str | None) -> bytes:
    return cluster_registration.answer(API_KEY, request, code, message)


async def handle(broker: Broker, request: Any) -> bytes:
    node_id = request.body.broker_id
    message = f"Broker ID {node_id} is not currently registered"
    not_registered = (BROKER_ID_NOT_REGISTERED, message)
    return await cluster_registration.handle(broker, request, API_KEY, node_id, not_registered)
