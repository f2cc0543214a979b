"""OffsetFetch (key 9), v1-v9: committed offsets of named partitions, or of all
partitions (topics null, v2+); several groups per request from v8. Partitions
without a committed offset get -1. require_stable (v7+) needs nothing: offsets are
only ever written whole (no pending transactional commits).
Needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) and on each topic (else
TOPIC_AUTHORIZATION_FAILED per partition; left out of an all-partitions answer), as in
Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.queues.core import queue_store
from sidecar.queues.kafka_offsets import queue_offsets
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.group_store import CommittedOffset

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9


def _partition(index: int, value: CommittedOffset | None, error: int) -> dict[str, Any]:
    return {
        "partition_index": index,
        "committed_offset": value.offset if value else -1,
        "committed_leader_epoch": value.leader_epoch if value else -1,
        "metadata": value.metadata if value else "",
        "error_code": error,
    }


async def _group(
    broker: Broker,
    request: Any,
    group_id: str,
    topics: Any,
    member_id: str | None = None,
    member_epoch: int = -1,
    require_stable: bool = False,
) -> dict[str, Any]:
    """One group's answer: {group_id, topics, error_code}. require_stable: partitions
    whose offsets an open transaction holds answer UNSTABLE_OFFSET_COMMIT (the
    consumer retries), as Kafka's."""
    wanted = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    try:
        if not checks.group_allowed(broker, request, Operation.DESCRIBE, group_id):
            if request.header.api_version >= 8:  # Kafka 4.2 answers no topics
                return {
                    "group_id": group_id,
                    "error_code": checks.GROUP_AUTHORIZATION_FAILED,
                    "topics": [],
                }
            raise CoordinatorError("GROUP_AUTHORIZATION_FAILED")
        if await queue_store(broker).exists(group_id):
            # A queue group's committed offset: its lowest unfinished offset (lag tools
            # then show the queue's depth), sidecar/queues/core.py.
            got = await queue_offsets(queue_store(broker), group_id, wanted)
        else:
            got = await broker.groups.fetch_offsets(group_id, wanted, member_id, member_epoch)
    except CoordinatorError as exc:
        code = errors.code(exc.code)
        return {
            "group_id": group_id,
            "error_code": code,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [_partition(p, None, code) for p in t.partition_indexes],
                }
                for t in topics or []
            ],
        }
    got = got or {}
    unstable: set[tuple[str, int]] = set()
    if require_stable and wanted:
        unstable = await broker.transactions.txns.unstable(group_id, wanted)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    # DESCRIBE on each topic: all partitions leave others out, named ones answer
    # TOPIC_AUTHORIZATION_FAILED, as in Kafka.
    if wanted is None:
        described = checks.allowed_topics(broker, request, Operation.DESCRIBE, (t for t, _ in got))
        for (topic, p), value in sorted(got.items()):
            if topic in described:
                by_topic.setdefault(topic, []).append(_partition(p, value, errors.NONE))
    else:
        described = checks.allowed_topics(
            broker, request, Operation.DESCRIBE, (t for t, _ in wanted)
        )
        for topic, p in wanted:
            if topic in described and (topic, p) in unstable:
                entry = _partition(p, None, errors.UNSTABLE_OFFSET_COMMIT)
            elif topic in described:
                entry = _partition(p, got.get((topic, p)), errors.NONE)
            else:
                entry = _partition(p, None, checks.TOPIC_AUTHORIZATION_FAILED)
            by_topic.setdefault(topic, []).append(entry)
    return {
        "group_id": group_id,
        "error_code": errors.NONE,
        "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
    }


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    if version >= 8:
        groups = [
            await _group(
                broker,
                request,
                g.group_id,
                g.topics,
                getattr(g, "member_id", None),
                getattr(g, "member_epoch", -1),
                body.require_stable,
            )
            for g in body.groups
        ]
        return encode_response(API_KEY, version, {"throttle_time": 0, "groups": groups})
    answer = await _group(
        broker,
        request,
        body.group_id,
        body.topics,
        require_stable=getattr(body, "require_stable", False),  # v7+
    )
    return encode_response(
        API_KEY,
        version,
        {"throttle_time": 0, "topics": answer["topics"], "error_code": answer["error_code"]},
    )
