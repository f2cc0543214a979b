"""ElectLeaders (key 43), v0-v2: `kafka-leader-election` and AdminClient.electLeaders.
Every Skiff partition has one copy, in Redis, and every sidecar leads it: its preferred
leader always leads, so, as Kafka's ReplicationControlManager.electLeaders answers a
partition whose preferred leader leads (and, for an unclean election, one that has a
leader), every existing partition gets ELECTION_NOT_NEEDED; an unknown topic or
partition UNKNOWN_TOPIC_OR_PARTITION with Kafka's text. With no partitions named (null:
all), Kafka leaves out the partitions that needed no election: every topic is listed
with none. Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED for the request
and each partition named); an election type other than 0 (preferred) or 1 (unclean) is
INVALID_REQUEST."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2

ELECTION_NOT_NEEDED = errors.code("ELECTION_NOT_NEEDED")
UNKNOWN_TOPIC_OR_PARTITION = errors.UNKNOWN_TOPIC_OR_PARTITION


def _refused(version: int, named: Any, code: int, message: str | None) -> bytes:
    results = [
        {
            "topic": t.topic,
            "partition_result": [
                {"partition_id": p, "error_code": code, "error_message": message}
                for p in t.partitions
            ],
        }
        for t in named or ()
    ]
    data = {"throttle_time": 0, "error_code": code, "replica_election_results": results}
    return encode_response(API_KEY, version, data)


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    named = body.topic_partitions
    if not checks.cluster_allowed(broker, request, Operation.ALTER):
        return _refused(version, named, checks.CLUSTER_AUTHORIZATION_FAILED, None)
    election_type = getattr(body, "election_type", 0)  # v0: preferred
    if election_type not in (0, 1):
        message = f"Unknown election type {election_type}"
        return _refused(version, named, errors.code("INVALID_REQUEST"), message)
    results: list[dict[str, Any]] = []
    if named is None:
        for info in sorted(await broker.store.list_topics(), key=lambda i: i.name):
            results.append({"topic": info.name, "partition_result": []})
    else:
        for t in named:
            info = await broker.store.get_topic(t.topic)
            parts = []
            for p in t.partitions:
                if info is None:
                    code, message = UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {t.topic}"
                elif not 0 <= p < info.partitions:
                    code = UNKNOWN_TOPIC_OR_PARTITION
                    message = f"No such partition as {t.topic}-{p}"
                else:
                    code, message = ELECTION_NOT_NEEDED, None
                parts.append({"partition_id": p, "error_code": code, "error_message": message})
            results.append({"topic": t.topic, "partition_result": parts})
    data = {"throttle_time": 0, "error_code": errors.NONE, "replica_election_results": results}
    return encode_response(API_KEY, version, data)
