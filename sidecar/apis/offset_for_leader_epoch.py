"""OffsetForLeaderEpoch (key 23), v2-v4 (Kafka 4.x removed v0-v1, KIP-896): the end offset
of a leader epoch, which consumers ask for to detect log truncation after a leader change.
A Skiff partition never changes leader in Kafka's sense (Redis keeps one log), so its
whole log is one epoch, 0, starting at offset 0 (the epoch fetched batches carry).
Kafka's LeaderEpochFileCache.endOffsetFor over that one entry: epoch 0 ends at the log end
offset; a later epoch is unknown (-1, -1); an earlier one (not -1) answers itself with
the first epoch's start offset; -1 is undefined (-1, -1). A CurrentLeaderEpoch other
than -1 is checked as Kafka checks it against the leader's epoch 0: below it
FENCED_LEADER_EPOCH, above it UNKNOWN_LEADER_EPOCH. Authorization as Kafka's: CLUSTER_ACTION
on the cluster, else DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED per partition)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4

EPOCH = 0  # the one leader epoch of every partition
UNDEFINED = -1


async def _end_offset(
    broker: Broker, topic: str, partition: int, current: int, epoch: int
) -> dict[str, Any]:
    if current != UNDEFINED and current < EPOCH:
        return {"error_code": errors.code("FENCED_LEADER_EPOCH")}
    if current > EPOCH:
        return {"error_code": errors.code("UNKNOWN_LEADER_EPOCH")}
    if epoch == EPOCH:
        _, log_end, _, _ = await broker.store.watermarks(topic, partition)
        return {"error_code": errors.NONE, "leader_epoch": EPOCH, "end_offset": log_end}
    if epoch < EPOCH and epoch != UNDEFINED:
        return {"error_code": errors.NONE, "leader_epoch": epoch, "end_offset": 0}
    return {"error_code": errors.NONE}


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    topics = request.body.topics
    if checks.cluster_allowed(broker, request, Operation.CLUSTER_ACTION):
        described = {t.topic for t in topics}
    else:
        described = checks.allowed_topics(
            broker, request, Operation.DESCRIBE, (t.topic for t in topics)
        )
    out = []
    for t in topics:
        info = await broker.store.get_topic(t.topic) if t.topic in described else None
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition": p.partition, "leader_epoch": -1, "end_offset": -1}
            if t.topic not in described:
                entry["error_code"] = checks.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition < info.partitions:
                entry["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                entry.update(
                    await _end_offset(
                        broker, t.topic, p.partition, p.current_leader_epoch, p.leader_epoch
                    )
                )
            parts.append(entry)
        out.append({"topic": t.topic, "partitions": parts})
    return encode_response(API_KEY, version, {"throttle_time": 0, "topics": out})
