"""DescribeTopicPartitions (key 75), v0: Metadata's partition view, paged, as Kafka 4.x's
DescribeTopicPartitionsRequestHandler answers (the AdminClient's describeTopics, so
`kafka-topics --describe`, uses it). Topics in name order from the cursor's topic on, at
most min(ResponsePartitionLimit, 2000) partitions (at least 1); a topic cut short, or the
next topic when the limit is used up, becomes NextCursor. Partitions as Metadata reports
them, with empty ELR lists (one replica: there is no eligible leader besides it).
An all-topics request leaves out unknown and undescribable topics; a named one answers
TOPIC_AUTHORIZATION_FAILED (after the others, with a zero topic id) or
UNKNOWN_TOPIC_OR_PARTITION / INVALID_TOPIC_EXCEPTION. A cursor whose topic is not among
the named ones, or whose partition is negative, fails the request: INVALID_REQUEST for
every named topic (Kafka's getErrorResponse). With Redis unavailable, a named topic not
known from memory is LEADER_NOT_AVAILABLE (retriable), as in Metadata."""

from __future__ import annotations

import uuid
from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.resilience import RedisUnavailable
from sidecar.storage.store import TopicInfo
from sidecar.validation.topic_names import invalid_name_reason

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default
ZERO_UUID = uuid.UUID(int=0)
LEADER_NOT_AVAILABLE = errors.code("LEADER_NOT_AVAILABLE")


def _partitions(leaders: tuple[int, ...], start: int, end: int) -> list[dict[str, Any]]:
    return [
        {
            "error_code": errors.NONE,
            "partition_index": p,
            "leader_id": leaders[p],
            "leader_epoch": -1,  # as Metadata reports it
            "replica_nodes": [leaders[p]],
            "isr_nodes": [leaders[p]],
            "eligible_leader_replicas": [],
            "last_known_elr": [],
            "offline_replicas": [],
        }
        for p in range(start, end)
    ]


def _failed(names: list[str], code: int) -> bytes:
    topics = [
        {"error_code": code, "name": n, "topic_id": ZERO_UUID, "partitions": []} for n in names
    ]
    return encode_response(API_KEY, 0, {"throttle_time": 0, "topics": topics})


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    cluster = broker.cluster
    await cluster.catch_up()
    cursor = body.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not body.topics
    known: dict[str, TopicInfo] = {}
    if fetch_all:
        known = {t.name: t for t in await broker.store.list_topics()}
        names = {n for n in known if n >= cursor_topic}
    else:
        requested = [str(t.name) for t in body.topics]
        names = {n for n in requested if n >= cursor_topic}
        if cursor is not None and cursor_topic not in names:
            return _failed(requested, errors.INVALID_REQUEST)
    if cursor is not None and cursor.partition_index < 0:
        return _failed([str(t.name) for t in body.topics], errors.INVALID_REQUEST)
    ordered = sorted(names)
    allowed = checks.allowed_topics(broker, request, Operation.DESCRIBE, ordered)
    denied = [] if fetch_all else [n for n in ordered if n not in allowed]
    remaining = max(min(MAX_PARTITIONS, body.response_partition_limit), 1)
    topics: list[dict[str, Any]] = []
    next_cursor: dict[str, Any] | None = None
    for name in (n for n in ordered if n in allowed):
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        try:
            info = known.get(name) if fetch_all else await broker.store.get_topic(name)
        except RedisUnavailable:  # not known from memory: retriable, as from Metadata
            topics.append({"error_code": LEADER_NOT_AVAILABLE, "name": name, "topic_id": ZERO_UUID})
            continue
        if info is None:
            if not fetch_all:
                code = (
                    errors.INVALID_TOPIC_EXCEPTION
                    if invalid_name_reason(name)
                    else errors.UNKNOWN_TOPIC_OR_PARTITION
                )
                topics.append({"error_code": code, "name": name, "topic_id": ZERO_UUID})
                topics[-1]["topic_authorized_operations"] = checks.authorized_operations(
                    broker, request, checks.TOPIC, name
                )
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        end = min(info.partitions, start + remaining)
        partitions = _partitions(cluster.leaders(name, info.partitions), start, end)
        topics.append(
            {
                "error_code": errors.NONE,
                "name": name,
                "topic_id": info.topic_id,
                "is_internal": False,
                "partitions": partitions,
                "topic_authorized_operations": checks.authorized_operations(
                    broker, request, checks.TOPIC, name
                ),
            }
        )
        if end < info.partitions:
            next_cursor = {"topic_name": name, "partition_index": end}
            break
        remaining -= len(partitions)
    topics.extend(
        {"error_code": checks.TOPIC_AUTHORIZATION_FAILED, "name": n, "topic_id": ZERO_UUID}
        for n in denied
    )
    return encode_response(
        API_KEY, 0, {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor}
    )
