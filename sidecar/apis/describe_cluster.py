"""DescribeCluster (key 60), v0-v2: the cluster id, every live sidecar as a broker and
the controller id (the lowest live node id, as Metadata reports it, so every sidecar
gives the same answer). Only the broker endpoint type exists. v2 (KIP-1073) may ask for
fenced brokers too: a sidecar is either live and registered or gone, so none is fenced.
Needs no authorization (Kafka's neither); the cluster's authorized operations, when
asked for, come from the authorizer, and are 0 for a principal that may not DESCRIBE it
(without an authorizer: every cluster operation, 8096, as Kafka 3.9 answers)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
NO_OPERATIONS = checks.NOT_REQUESTED


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    endpoint = getattr(body, "endpoint_type", BROKER_ENDPOINT)
    out: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": errors.NONE,
        "error_message": None,
        "endpoint_type": BROKER_ENDPOINT,
        "cluster_id": "",
        "controller_id": -1,
        "brokers": [],
        "cluster_authorized_operations": NO_OPERATIONS,
    }
    if endpoint == CONTROLLER_ENDPOINT:
        out["error_code"] = errors.code("MISMATCHED_ENDPOINT_TYPE")
        out["error_message"] = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
            "of type CONTROLLER"
        )
    elif endpoint != BROKER_ENDPOINT:
        out["error_code"] = errors.code("UNSUPPORTED_ENDPOINT_TYPE")
        out["error_message"] = f"Unsupported endpoint type {endpoint}"
    else:
        brokers = broker.cluster.brokers(request.security.listener)
        out["cluster_id"] = broker.cluster_id
        out["controller_id"] = brokers[0].node_id
        out["brokers"] = [
            {
                "broker_id": b.node_id,
                "host": b.host,
                "port": b.port,
                "rack": None,
                "is_fenced": False,
            }
            for b in brokers
        ]
        if body.include_cluster_authorized_operations:
            out["cluster_authorized_operations"] = checks.cluster_authorized_operations(
                broker, request
            )
    return encode_response(API_KEY, version, out)
