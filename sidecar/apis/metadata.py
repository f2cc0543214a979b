"""Metadata (key 3), v0-v12: every live sidecar is a broker; partition leadership is
spread over them (any sidecar serves any partition, so this only spreads load).
Topics named in the request are auto-created when the broker and the request allow it."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.cluster import Cluster
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.storage.resilience import RedisUnavailable
from sidecar.storage.store import TopicInfo
from sidecar.validation.topic_names import invalid_name_reason

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 12


def _topic_entry(info: TopicInfo, cluster: Cluster) -> dict[str, Any]:
    leaders = cluster.leaders(info.name, info.partitions)
    return {
        "error_code": errors.NONE,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": False,
        "partitions": [
            {
                "error_code": errors.NONE,
                "partition_index": p,
                "leader_id": leaders[p],
                "leader_epoch": -1,
                "replica_nodes": [leaders[p]],
                "isr_nodes": [leaders[p]],
                "offline_replicas": [],
            }
            for p in range(info.partitions)
        ],
        "topic_authorized_operations": -2147483648,
    }


def _error_entry(name: str | None, topic_id: Any, code: int) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "partitions": []}


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    cluster = broker.cluster
    # v0 asks for all topics with an empty list; v1+ with a null one.
    want_all = body.topics is None or (version == 0 and not body.topics)
    allow_create = broker.settings.auto_create_topics and (
        version < 4 or body.allow_auto_topic_creation
    )
    topics: list[dict[str, Any]] = []
    if want_all:
        topics = [_topic_entry(t, cluster) for t in await broker.store.list_topics()]
    else:
        for requested in body.topics:
            name = requested.name
            topic_id = getattr(requested, "topic_id", None)
            if name is None and version < 12:
                # Kafka: topic ids are not supported in Metadata requests before v12,
                # whose responses have no null names either.
                topics.append(_error_entry("", topic_id, errors.INVALID_REQUEST))
                continue
            if name is None and topic_id is not None and topic_id.int != 0:
                info = await broker.store.topic_by_id(topic_id)
                topics.append(
                    _topic_entry(info, cluster)
                    if info
                    else _error_entry(None, topic_id, errors.UNKNOWN_TOPIC_ID)
                )
                continue
            if invalid_name_reason(name):
                topics.append(_error_entry(name, None, errors.INVALID_TOPIC_EXCEPTION))
                continue
            try:
                info = (
                    await broker.topic_for_produce_or_metadata(name)
                    if allow_create
                    else await broker.store.get_topic(name)
                )
            except RedisUnavailable:
                # Not known from memory and Redis is down: retriable for every client.
                topics.append(_error_entry(name, None, errors.LEADER_NOT_AVAILABLE))
                continue
            topics.append(
                _topic_entry(info, cluster)
                if info
                else _error_entry(name, None, errors.UNKNOWN_TOPIC_OR_PARTITION)
            )
    brokers = cluster.brokers(request.security.listener)
    return encode_response(
        API_KEY,
        version,
        {
            "throttle_time": 0,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port} for b in brokers],
            "cluster_id": broker.cluster_id,
            "controller_id": brokers[0].node_id,
            "topics": topics,
            "cluster_authorized_operations": -2147483648,
        },
    )
