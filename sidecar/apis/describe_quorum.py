"""DescribeQuorum (key 55), v0-v2: the KRaft metadata quorum as `kafka-metadata-quorum
describe` and AdminClient.describeMetadataQuorum show it. Skiff's metadata lives in
Redis, not in a Raft log, and any sidecar can act for the cluster, so the quorum
reported is the live sidecars: every one a voter (no observers), the leader the
controller Metadata and DescribeCluster name (the lowest live node id). There is no
metadata log: the leader epoch, high watermark and every log end offset are 0, so the
lag is 0. A voter's fetch and caught-up times are its last registration renewal
(Redis's clock), which is what they tell an operator on Kafka: when that node was last
heard from. v2's nodes carry each sidecar's listeners; directory ids are zero, as on a
Kafka quorum of static voters.

As Kafka: a request for anything but partition 0 of `__cluster_metadata`, alone, gets
UNKNOWN_TOPIC_OR_PARTITION for every partition named and no nodes. Needs DESCRIBE on
the cluster (else a top-level CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.registry import BrokerInfo

API_KEY = 55
MIN_VERSION = 0
MAX_VERSION = 2

METADATA_TOPIC = "__cluster_metadata"
NOT_HOSTED = "This server does not host this topic-partition."
NO_LOG_OFFSET = 0  # no metadata log: nothing to lag behind


def _asks_for_the_quorum(body: Any) -> bool:
    """Kafka's hasValidTopicPartition: exactly one topic, `__cluster_metadata`, with
    exactly partition 0."""
    return (
        len(body.topics) == 1
        and body.topics[0].topic_name == METADATA_TOPIC
        and [p.partition_index for p in body.topics[0].partitions] == [0]
    )


def _replica(b: BrokerInfo) -> dict[str, Any]:
    return {
        "replica_id": b.node_id,
        "replica_directory_id": None,
        "log_end_offset": NO_LOG_OFFSET,
        "last_fetch_timestamp": b.renewed_ms,
        "last_caught_up_timestamp": b.renewed_ms,
    }


def _node(b: BrokerInfo, listener: str | None) -> dict[str, Any]:
    endpoints = b.listeners or ((listener or "PLAINTEXT", b.host, b.port),)
    return {
        "node_id": b.node_id,
        "listeners": [{"name": n, "host": h, "port": p} for n, h, p in endpoints],
    }


def _partition(index: int, code: int, message: str | None) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": code,
        "error_message": message,
        "leader_id": 0,
        "leader_epoch": 0,
        "high_watermark": 0,
        "current_voters": [],
        "observers": [],
    }


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    out: dict[str, Any] = {
        "error_code": errors.NONE,
        "error_message": "",
        "topics": [],
        "nodes": [],
    }
    if not checks.cluster_allowed(broker, request, Operation.DESCRIBE):
        out["error_code"] = checks.CLUSTER_AUTHORIZATION_FAILED
        out["error_message"] = "Cluster authorization failed."
    elif not _asks_for_the_quorum(body):
        code = errors.UNKNOWN_TOPIC_OR_PARTITION
        out["topics"] = [
            {
                "topic_name": t.topic_name,
                "partitions": [
                    _partition(p.partition_index, code, NOT_HOSTED) for p in t.partitions
                ],
            }
            for t in body.topics
        ]
    else:
        await broker.cluster.catch_up()  # bounded; the heartbeat's list otherwise
        voters = broker.cluster.brokers()
        quorum = _partition(0, errors.NONE, "")
        quorum["leader_id"] = voters[0].node_id
        quorum["current_voters"] = [_replica(b) for b in voters]
        out["topics"] = [{"topic_name": METADATA_TOPIC, "partitions": [quorum]}]
        out["nodes"] = [_node(b, request.security.listener) for b in voters]
    return encode_response(API_KEY, version, out)
