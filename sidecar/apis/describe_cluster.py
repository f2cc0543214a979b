"""DescribeCluster (key 60), v0-v1: the cluster id, every live sidecar as a broker and
the controller id (the lowest live node id, as Metadata reports it, so every sidecar
gives the same answer). Only the broker endpoint type exists."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1

BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
NO_OPERATIONS = -(2**31)  # not requested
# Without an authorizer Kafka allows every cluster operation; this is the bit set Kafka
# 3.9 answers (ALTER, ALTER_CONFIGS, CLUSTER_ACTION, CREATE, DESCRIBE, DESCRIBE_CONFIGS,
# IDEMPOTENT_WRITE).
ALL_CLUSTER_OPERATIONS = 8096


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
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": None} for b in brokers
        ]
        if body.include_cluster_authorized_operations:
            out["cluster_authorized_operations"] = ALL_CLUSTER_OPERATIONS
    return encode_response(API_KEY, version, out)
