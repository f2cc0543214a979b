"""AlterReplicaLogDirs (key 34), v1-v2 (Kafka 4 dropped v0): move a replica to another
log dir of its broker (`kafka-reassign-partitions` with `log_dirs`,
AdminClient.alterReplicaLogDirs). A sidecar has one log dir, its Redis (named as
DescribeLogDirs names it), so nothing ever moves. Per partition, in the order of
Kafka's ReplicaManager.alterReplicaLogDirs: a dir that is not this sidecar's Redis is
LOG_DIR_NOT_FOUND (the remote tier DescribeLogDirs lists holds no replica either); an
unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; a partition another sidecar
leads is NOT_LEADER_OR_FOLLOWER (no replica here); else NONE, the replica being there
already. Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every
partition), as in Kafka. A partition named under several dirs goes to the last, and the
answer is grouped by topic, as Kafka's (a map of partition to dir)."""

from __future__ import annotations

from typing import Any

from sidecar.apis.describe_log_dirs import log_dir_name
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 34
MIN_VERSION = 1
MAX_VERSION = 2

LOG_DIR_NOT_FOUND = errors.code("LOG_DIR_NOT_FOUND")
NOT_LEADER_OR_FOLLOWER = errors.code("NOT_LEADER_OR_FOLLOWER")


def response(request: Any, code: int) -> bytes:
    """`code` for every partition named, per dir and topic as named (Kafka's
    getErrorResponse: a refused or unanswerable request)."""
    results = [
        {
            "topic_name": t.name,
            "partitions": [{"partition_index": p, "error_code": code} for p in t.partitions],
        }
        for d in request.body.dirs
        for t in d.topics
    ]
    return _encode(request, results)


def _encode(request: Any, results: list[dict[str, Any]]) -> bytes:
    data = {"throttle_time": 0, "results": results}
    return encode_response(API_KEY, request.header.api_version, data)


async def handle(broker: Broker, request: Any) -> bytes:
    if not checks.cluster_allowed(broker, request, Operation.ALTER):
        return response(request, checks.CLUSTER_AUTHORIZATION_FAILED)
    # As Kafka: one target dir per partition, a later dir naming it again winning, and
    # the answer grouped by topic.
    target: dict[tuple[str, int], str] = {}
    for d in request.body.dirs:
        for t in d.topics:
            for p in t.partitions:
                target.pop((t.name, p), None)
                target[(t.name, p)] = d.path
    here = log_dir_name(broker.store.description)
    cluster = broker.cluster
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (name, p), path in target.items():
        if path != here:
            code = LOG_DIR_NOT_FOUND
        else:
            info = await broker.store.get_topic(name)
            if info is None or not 0 <= p < info.partitions:
                code = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif cluster.leader(name, p, info.partitions) != cluster.node_id:
                code = NOT_LEADER_OR_FOLLOWER
            else:
                code = errors.NONE
        by_topic.setdefault(name, []).append({"partition_index": p, "error_code": code})
    results = [{"topic_name": n, "partitions": ps} for n, ps in by_topic.items()]
    return _encode(request, results)
