"""Metadata (key 3), v0-v13 (v13: the top-level error code of KIP-1102, always NONE:
Skiff never asks a client to rebootstrap): every live sidecar is a broker; partition leadership is
spread over them (any sidecar serves any partition, so this only spreads load).
Topics named in the request are auto-created when the broker and the request allow it.
Authorization as Kafka's: a topic the principal may not DESCRIBE is left out of an
all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (with no topic id;
asked by id: with no name); auto-creation needs CREATE on the cluster or the topic."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.cluster import Cluster
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.resilience import RedisUnavailable
from sidecar.storage.store import TopicInfo
from sidecar.validation.topic_names import invalid_name_reason

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13


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
        "topic_authorized_operations": checks.NOT_REQUESTED,
    }


def _error_entry(name: str | None, topic_id: Any, code: int) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "partitions": []}


def _denied(name: str | None, topic_id: Any) -> dict[str, Any]:
    return _error_entry(name, topic_id, checks.TOPIC_AUTHORIZATION_FAILED)


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    cluster = broker.cluster
    await cluster.catch_up()  # list a sidecar that registered since the last heartbeat
    # v0 asks for all topics with an empty list; v1+ with a null one.
    want_all = body.topics is None or (version == 0 and not body.topics)
    allow_create = broker.settings.auto_create_topics and (
        version < 4 or body.allow_auto_topic_creation
    )
    topics: list[dict[str, Any]] = []
    # Answers for topics the principal may DESCRIBE: they get their authorized
    # operations when asked for.
    described: list[dict[str, Any]] = []
    if want_all:
        every = await broker.store.list_topics()
        visible = checks.allowed_topics(
            broker, request, Operation.DESCRIBE, (t.name for t in every)
        )
        topics = described = [_topic_entry(t, cluster) for t in every if t.name in visible]
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
                if info is None:
                    topics.append(_error_entry(None, topic_id, errors.UNKNOWN_TOPIC_ID))
                elif not checks.topic_allowed(broker, request, Operation.DESCRIBE, info.name):
                    topics.append(_denied(None, topic_id))
                else:
                    described.append(_topic_entry(info, cluster))
                    topics.append(described[-1])
                continue
            if not checks.topic_allowed(broker, request, Operation.DESCRIBE, name):
                # Whether it exists is not disclosed (not even looked up).
                topics.append(_denied(name, None))
                continue
            if invalid_name_reason(name):
                topics.append(_error_entry(name, None, errors.INVALID_TOPIC_EXCEPTION))
                continue
            try:
                info = await broker.store.get_topic(name)
                if info is None and allow_create:
                    if not checks.may_create_topic(broker, request, name):
                        topics.append(_denied(name, None))
                        continue
                    info = await broker.topic_for_produce_or_metadata(name)
            except RedisUnavailable:
                # Not known from memory and Redis is down: retriable for every client.
                topics.append(_error_entry(name, None, errors.LEADER_NOT_AVAILABLE))
                continue
            described.append(
                _topic_entry(info, cluster)
                if info
                else _error_entry(name, None, errors.UNKNOWN_TOPIC_OR_PARTITION)
            )
            topics.append(described[-1])
    if getattr(body, "include_topic_authorized_operations", False):
        for entry in described:
            if entry["name"] is not None:
                entry["topic_authorized_operations"] = checks.authorized_operations(
                    broker, request, checks.TOPIC, entry["name"]
                )
    cluster_operations = checks.NOT_REQUESTED
    if 8 <= version <= 10 and body.include_cluster_authorized_operations:
        cluster_operations = checks.cluster_authorized_operations(broker, request)
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
            "cluster_authorized_operations": cluster_operations,
        },
    )
