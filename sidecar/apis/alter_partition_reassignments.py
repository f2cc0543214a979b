"""AlterPartitionReassignments (key 45), v0-v1: `kafka-reassign-partitions --execute` /
`--cancel` and AdminClient.alterPartitionReassignments, answered per partition with
Kafka's checks and messages (ReplicationControlManager.alterPartitionReassignment):
an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; a cancellation
(replicas null) is NO_REASSIGNMENT_IN_PROGRESS, as nothing is ever being moved; a
target list that is empty, names a broker twice or one that is not registered is
INVALID_REPLICA_ASSIGNMENT.

A Skiff partition has one copy, in Redis, and its leader is the sidecar Skiff picks
(cluster.leaders): a target that is that one broker needs no change (NONE, as Kafka
answers a reassignment to the current replicas); more than one broker is
INVALID_REPLICATION_FACTOR (v1 with allow_replication_factor_change false: Kafka's
KIP-860 message); another single broker is INVALID_REPLICA_ASSIGNMENT saying why.
Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED, for the request and each
partition named)."""

from __future__ import annotations

from typing import Any

from sidecar.apis.replica_assignment import (
    INVALID_REPLICA_ASSIGNMENT,
    check_replicas,
    one_copy_message,
)
from sidecar.broker import Broker
from sidecar.config.admin import AdminError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1

NO_REASSIGNMENT_IN_PROGRESS = errors.code("NO_REASSIGNMENT_IN_PROGRESS")


def response(request: Any, code: int, message: str | None, per_partition: Any) -> bytes:
    """The answer with `code` for the request and per_partition(topic, partition) ->
    (code, message) for each partition named."""
    topics = [
        {
            "name": t.name,
            "partitions": [
                dict(
                    zip(
                        ("partition_index", "error_code", "error_message"),
                        (p.partition_index, *per_partition(t, p)),
                        strict=True,
                    )
                )
                for p in t.partitions
            ],
        }
        for t in request.body.topics
    ]
    data: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": code,
        "error_message": message,
        "responses": topics,
    }
    if request.header.api_version >= 1:
        data["allow_replication_factor_change"] = request.body.allow_replication_factor_change
    return encode_response(API_KEY, request.header.api_version, data)


async def handle(broker: Broker, request: Any) -> bytes:
    if not checks.cluster_allowed(broker, request, Operation.ALTER):
        denied = checks.CLUSTER_AUTHORIZATION_FAILED
        return response(request, denied, None, lambda t, p: (denied, None))
    allow_change = getattr(request.body, "allow_replication_factor_change", True)
    live = {b.node_id for b in broker.cluster.brokers()}
    answers: list[tuple[int, str | None]] = []  # in the request's order
    for t in request.body.topics:
        info = await broker.store.get_topic(t.name)
        leaders = broker.cluster.leaders(t.name, info.partitions) if info is not None else ()
        for p in t.partitions:
            index = p.partition_index
            if info is None:
                message = f"Unable to find a topic named {t.name}."
                answer = (errors.UNKNOWN_TOPIC_OR_PARTITION, message)
            elif not 0 <= index < info.partitions:
                message = f"Unable to find partition {t.name}:{index}."
                answer = (errors.UNKNOWN_TOPIC_OR_PARTITION, message)
            elif p.replicas is None:
                answer = (NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
            else:
                target = list(p.replicas)
                answer = _change(t.name, index, target, leaders[index], live, allow_change)
            answers.append(answer)
    ordered = iter(answers)
    return response(request, errors.NONE, None, lambda t, p: next(ordered))


def _change(
    topic: str, index: int, target: list[int], leader: int, live: set[int], allow_change: bool
) -> tuple[int, str | None]:
    try:
        check_replicas(sorted(target), live)
    except AdminError as exc:
        return exc.code, exc.message
    if len(target) != 1:
        if not allow_change:
            message = f"The replication factor is changed from 1 to {len(target)}"
            return errors.INVALID_REPLICATION_FACTOR, message
        return errors.INVALID_REPLICATION_FACTOR, one_copy_message(len(target))
    if target[0] != leader:
        return INVALID_REPLICA_ASSIGNMENT, (
            f"Partition {topic}:{index} cannot be moved to broker {target[0]}: Skiff keeps "
            f"it once, in Redis, and picks the sidecar that leads it (now {leader}) itself"
        )
    return errors.NONE, None
