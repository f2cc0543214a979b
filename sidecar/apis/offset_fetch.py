"""OffsetFetch (key 9), v1-v10: committed offsets of named partitions, or of all
partitions (topics null, v2+); several groups per request from v8. Partitions
without a committed offset get -1. require_stable (v7+): partitions whose offsets an
open transaction holds answer UNSTABLE_OFFSET_COMMIT.
Needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED) and on each topic (else
TOPIC_AUTHORIZATION_FAILED per partition; left out of an all-partitions answer), as in
Kafka.

v10 (Kafka 4.1) names topics by id, in the request and the answer. Each id is resolved
to its topic's name (offsets stay stored by name, so v9 and v10 see the same offsets);
the partitions of an id no topic has (the zero id too) answer UNKNOWN_TOPIC_ID with no
offset, before the topic's DESCRIBE check, and an all-partitions answer leaves out
topics that no longer exist (it could not name them), as Kafka's KafkaApis does."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
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
MAX_VERSION = 10
TOPIC_IDS_VERSION = 10  # topics named by id (request and answer)

# A requested topic: (its name, None for an unknown id; its id at v10; partitions).
Requested = tuple[str | None, uuid.UUID | None, Sequence[int]]


def _partition(index: int, value: CommittedOffset | None, error: int) -> dict[str, Any]:
    return {
        "partition_index": index,
        "committed_offset": value.offset if value else -1,
        "committed_leader_epoch": value.leader_epoch if value else -1,
        "metadata": value.metadata if value else "",
        "error_code": error,
    }


async def _requested(broker: Broker, topics: Any, by_id: bool) -> list[Requested] | None:
    """The request's topics (None: all partitions), v10's ids resolved to names."""
    if topics is None:
        return None
    if not by_id:
        return [(t.name, None, t.partition_indexes) for t in topics]
    out: list[Requested] = []
    for t in topics:
        # kio reads the zero id (the client knows none) as None: an unknown id too.
        info = await broker.store.topic_by_id(t.topic_id)
        out.append((info.name if info else None, t.topic_id, t.partition_indexes))
    return out


def _topic(name: str | None, topic_id: uuid.UUID | None, parts: Any) -> dict[str, Any]:
    """One topic of the answer: by name up to v9, by id from v10 (the encoder keeps the
    field the version has)."""
    return {"name": name, "topic_id": topic_id, "partitions": parts}


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
    by_id = request.header.api_version >= TOPIC_IDS_VERSION
    try:
        if not checks.group_allowed(broker, request, Operation.DESCRIBE, group_id):
            if request.header.api_version >= 8:  # Kafka 4.2 answers no topics
                return {
                    "group_id": group_id,
                    "error_code": checks.GROUP_AUTHORIZATION_FAILED,
                    "topics": [],
                }
            raise CoordinatorError("GROUP_AUTHORIZATION_FAILED")
        requested = await _requested(broker, topics, by_id)
        # The partitions to read: those of topics that exist (by name, or an id known).
        wanted = (
            None
            if requested is None
            else [(name, p) for name, _, ps in requested if name is not None for p in ps]
        )
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
                _topic(
                    None if by_id else t.name,
                    t.topic_id if by_id else None,
                    [_partition(p, None, code) for p in t.partition_indexes],
                )
                for t in topics or []
            ],
        }
    got = got or {}
    unstable: set[tuple[str, int]] = set()
    if require_stable and wanted:
        unstable = await broker.transactions.txns.unstable(group_id, wanted)
    # Per topic (name, and id from v10): its partitions' answers.
    by_topic: dict[tuple[str | None, uuid.UUID | None], list[dict[str, Any]]] = {}
    # DESCRIBE on each topic: all partitions leave others out, named ones answer
    # TOPIC_AUTHORIZATION_FAILED, as in Kafka.
    if requested is None:
        described = checks.allowed_topics(broker, request, Operation.DESCRIBE, (t for t, _ in got))
        ids: dict[str, uuid.UUID | None] = {}
        for (topic, p), value in sorted(got.items()):
            if topic not in described:
                continue
            if by_id and topic not in ids:
                info = await broker.store.get_topic(topic)
                ids[topic] = info.topic_id if info is not None else None
            if by_id and ids[topic] is None:
                continue  # a deleted topic: v10 cannot name it (Kafka leaves it out)
            key = (topic, ids.get(topic))
            by_topic.setdefault(key, []).append(_partition(p, value, errors.NONE))
    else:
        described = checks.allowed_topics(
            broker, request, Operation.DESCRIBE, (name for name, _, _ in requested)
        )
        for topic, topic_id, ps in requested:
            for p in ps:
                if topic is None:  # v10: no topic has this id
                    entry = _partition(p, None, errors.UNKNOWN_TOPIC_ID)
                elif topic in described and (topic, p) in unstable:
                    entry = _partition(p, None, errors.UNSTABLE_OFFSET_COMMIT)
                elif topic in described:
                    entry = _partition(p, got.get((topic, p)), errors.NONE)
                else:
                    entry = _partition(p, None, checks.TOPIC_AUTHORIZATION_FAILED)
                by_topic.setdefault((topic, topic_id), []).append(entry)
    return {
        "group_id": group_id,
        "error_code": errors.NONE,
        "topics": [_topic(name, tid, parts) for (name, tid), parts in by_topic.items()],
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
