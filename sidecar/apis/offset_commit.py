"""OffsetCommit (key 8), v2-v10: committed offsets go to Redis before the answer.
Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and oversized metadata
OFFSET_METADATA_TOO_LARGE; the group decides for the rest (groups/coordinator.py).
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED for every partition) and
READ on each topic (else TOPIC_AUTHORIZATION_FAILED), as in Kafka.

v10 (Kafka 4.1) names topics by id and answers with the id: each id is resolved to its
topic's name first (offsets stay stored by name, so v9 and v10 see the same offsets),
and the partitions of an id no topic has (the zero id too) get UNKNOWN_TOPIC_ID,
after the group check and before the topic's, as Kafka's KafkaApis does.

The answer lists the partitions refused before the group coordinator first (unknown
topics, ids and partitions, topics not authorized), as Kafka 4 does
(partition_errors.refused_first); a commit to a group that does not exist with a
generation is GROUP_ID_NOT_FOUND from v9 (ILLEGAL_GENERATION before), as Kafka 4's
OffsetMetadataManager answers."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from sidecar.apis.partition_errors import refused_first
from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response, ms
from sidecar.queues.core import queue_store
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.group_store import CommittedOffset

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 10
TOPIC_IDS_VERSION = 10  # topics named by id (request and response)


async def checked_offsets(
    broker: Broker,
    request: Any,
    now: int,
    expire: int,
    denied: str | None = None,
    topics: Any = None,
) -> tuple[dict[tuple[str, int], str], dict[tuple[str, int], CommittedOffset]]:
    """Kafka's per-partition checks of OffsetCommit and TxnOffsetCommit: (the error of
    each refused partition, the offsets to commit). `denied`: an error for every
    partition, checked first (TxnOffsetCommit's transactional id). `topics`: the named
    topics to check (default: the request's)."""
    body = request.body
    topics = body.topics if topics is None else topics
    results: dict[tuple[str, int], str] = {}
    valid: dict[tuple[str, int], CommittedOffset] = {}
    group_denied = not checks.group_allowed(broker, request, Operation.READ, body.group_id)
    readable = checks.allowed_topics(broker, request, Operation.READ, (t.name for t in topics))
    for topic in topics:
        info = await broker.store.get_topic(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            metadata = p.committed_metadata or ""
            if denied:
                results[tp] = denied
            elif group_denied:
                results[tp] = "GROUP_AUTHORIZATION_FAILED"
            elif topic.name not in readable:
                results[tp] = "TOPIC_AUTHORIZATION_FAILED"
            elif info is None or not 0 <= p.partition_index < info.partitions:
                results[tp] = "UNKNOWN_TOPIC_OR_PARTITION"
            elif len(metadata.encode()) > broker.settings.offset_metadata_max_bytes:
                results[tp] = "OFFSET_METADATA_TOO_LARGE"
            else:
                epoch = getattr(p, "committed_leader_epoch", -1)
                valid[tp] = CommittedOffset(p.committed_offset, epoch, metadata, now, expire)
    return results, valid


async def topics_by_id(broker: Broker, topics: Any) -> list[Any]:
    """v10: each request topic with the name of the topic its id names (None: no topic
    has that id; kio reads the zero id as None)."""
    named = []
    for t in topics:
        info = await broker.store.topic_by_id(t.topic_id)
        name = info.name if info is not None else None
        named.append(SimpleNamespace(name=name, topic_id=t.topic_id, partitions=t.partitions))
    return named


def answer_by_id(
    topics: list[Any], results: dict[tuple[str, int], str], unknown: str
) -> list[dict[str, Any]]:
    """v10's per-topic answer: the topic id, and per partition its error (`unknown` for
    the partitions of an unknown id)."""
    return [
        {
            "topic_id": t.topic_id,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": errors.code(
                        unknown if t.name is None else results[(t.name, p.partition_index)]
                    ),
                }
                for p in t.partitions
            ],
        }
        for t in topics
    ]


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    now = int(time.time() * 1000)
    retention = ms(body.retention_time) if 2 <= version <= 4 else -1
    expire = now + retention if retention >= 0 else -1
    by_id = await topics_by_id(broker, body.topics) if version >= TOPIC_IDS_VERSION else None
    known = None if by_id is None else [t for t in by_id if t.name is not None]
    results, valid = await checked_offsets(broker, request, now, expire, topics=known)
    if valid and await queue_store(broker).exists(body.group_id):
        # A queue (share) group's offsets move by acknowledgements only, as in Kafka.
        results.update({tp: "GROUP_ID_NOT_FOUND" for tp in valid})
        valid = {}
    if valid:
        try:
            error = await broker.groups.commit(
                body.group_id,
                body.generation_id_or_member_epoch,
                body.member_id,
                getattr(body, "group_instance_id", None),
                valid,
                version,
            )
        except CoordinatorError as exc:
            error = exc.code
        results.update({tp: error for tp in valid})
    if by_id is None:
        entries = [
            (t.name, p.partition_index, results[(t.name, p.partition_index)])
            for t in body.topics
            for p in t.partitions
        ]
        answer = [
            {"name": name, "partitions": _partitions(parts)}
            for name, parts in refused_first(entries)
        ]
    else:
        # An unknown id's partitions: GROUP_AUTHORIZATION_FAILED like all others when the
        # group is refused, else UNKNOWN_TOPIC_ID (it has no name to authorize).
        unknown = "UNKNOWN_TOPIC_ID"
        if len(by_id) > len(known or ()) and not checks.group_allowed(
            broker, request, Operation.READ, body.group_id
        ):
            unknown = "GROUP_AUTHORIZATION_FAILED"
        entries = [
            (
                t.topic_id,
                p.partition_index,
                unknown if t.name is None else results[(t.name, p.partition_index)],
            )
            for t in by_id
            for p in t.partitions
        ]
        answer = [
            {"topic_id": topic_id, "partitions": _partitions(parts)}
            for topic_id, parts in refused_first(entries)
        ]
    return encode_response(API_KEY, version, {"throttle_time": 0, "topics": answer})


def _partitions(parts: list[tuple[int, str]]) -> list[dict[str, int]]:
    return [{"partition_index": i, "error_code": errors.code(e)} for i, e in parts]
