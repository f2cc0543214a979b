"""DescribeClientQuotas (key 48), v0-v1: Skiff enforces no client quotas, so every
filter matches nothing. Served because `kafka-configs --describe --entity-type users`
asks it beside DescribeUserScramCredentials. As Kafka: DESCRIBE_CONFIGS on the cluster
or CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security.authorizer import CLUSTER_NAME, Operation, ResourceType

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(broker: Broker, request: Any) -> bytes:
    out: dict[str, Any] = {"throttle_time": 0, "error_code": errors.NONE, "error_message": None}
    if broker.authorizer.authorize(
        request.security, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        out["entries"] = []
    else:
        out["error_code"] = errors.code("CLUSTER_AUTHORIZATION_FAILED")
        out["error_message"] = "Cluster authorization failed."
        out["entries"] = None
    return encode_response(API_KEY, request.header.api_version, out)
