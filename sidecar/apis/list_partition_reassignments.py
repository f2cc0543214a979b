"""ListPartitionReassignments (key 46), v0: `kafka-reassign-partitions --list` and
AdminClient.listPartitionReassignments. Kafka lists only partitions whose replicas are
being moved (ReplicationControlManager.listPartitionReassignments); a Skiff partition
has one copy, in Redis, and never moves, so the answer is always an empty list, with
Kafka's null error message. Needs DESCRIBE on the cluster (else
CLUSTER_AUTHORIZATION_FAILED). No Redis involved."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(broker: Broker, request: Any) -> bytes:
    code = errors.NONE
    if not checks.cluster_allowed(broker, request, Operation.DESCRIBE):
        code = checks.CLUSTER_AUTHORIZATION_FAILED
    data = {"throttle_time": 0, "error_code": code, "error_message": None, "topics": []}
    return encode_response(API_KEY, request.header.api_version, data)
