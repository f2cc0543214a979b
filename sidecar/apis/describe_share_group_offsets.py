"""DescribeShareGroupOffsets (key 90), v0-v1: per partition a share group's start
offset (the lowest offset not yet finished, as the queue core keeps it) and (v1) its
lag, the records from there on not finished. Topics null: every topic the group has
read; an unknown group has no offsets (no error, as from Kafka). Read from Redis, so
any sidecar answers.
Needs DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED for it) and on each topic
(else TOPIC_AUTHORIZATION_FAILED per partition; left out of an all-topics answer)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.queues.core import QueueError
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share.records import queues

API_KEY = 90
MIN_VERSION = 0
MAX_VERSION = 1


async def _partition(broker: Broker, group_id: str, topic: str, p: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "partition_index": p,
        "start_offset": -1,
        "leader_epoch": -1,
        "lag": -1,
        "error_code": errors.NONE,
    }
    try:
        st = await queues(broker).partition_state(group_id, topic, p, scan=0)
    except QueueError as exc:
        out["error_code"], out["error_message"] = errors.code(exc.code), exc.message
        return out
    if st is not None:
        out["start_offset"] = st.committed
        # Unfinished: pending records plus those never handed out.
        out["lag"] = max(st.high_watermark - max(st.next_offset, st.committed), 0) + st.pending
    return out


async def _group(broker: Broker, request: Any, g: Any) -> dict[str, Any]:
    group_id = g.group_id
    if not checks.group_allowed(broker, request, Operation.DESCRIBE, group_id):
        return {
            "group_id": group_id,
            "topics": [],
            "error_code": checks.GROUP_AUTHORIZATION_FAILED,
        }
    core = queues(broker)
    known = await core.exists(group_id)
    if not known and g.topics is None:
        # As Kafka: an unknown group has no offsets (no error).
        return {"group_id": group_id, "topics": [], "error_code": errors.NONE}
    if g.topics is None:
        wanted = []
        for name in await core.topics(group_id):
            info = await broker.store.get_topic(name)
            if info is not None:
                wanted.append((name, list(range(info.partitions))))
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
    described = checks.allowed_topics(broker, request, Operation.DESCRIBE, (n for n, _ in wanted))
    if g.topics is None:
        wanted = [(n, parts) for n, parts in wanted if n in described]
    topics = []
    for name, parts in wanted:
        info = await broker.store.get_topic(name)
        entries = []
        for p in parts:
            if name not in described:
                entries.append(
                    {
                        "partition_index": p,
                        "start_offset": -1,
                        "leader_epoch": -1,
                        "lag": -1,
                        "error_code": checks.TOPIC_AUTHORIZATION_FAILED,
                    }
                )
            elif info is None or not 0 <= p < info.partitions:
                entries.append(
                    {
                        "partition_index": p,
                        "start_offset": -1,
                        "leader_epoch": -1,
                        "lag": -1,
                        "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
                        "error_message": "This server does not host this topic-partition.",
                    }
                )
            elif not known:
                entries.append(
                    {
                        "partition_index": p,
                        "start_offset": -1,
                        "leader_epoch": -1,
                        "lag": -1,
                        "error_code": errors.NONE,
                    }
                )
            else:
                entries.append(await _partition(broker, group_id, name, p))
        topics.append(
            {"topic_name": name, "topic_id": info.topic_id if info else None, "partitions": entries}
        )
    return {"group_id": group_id, "topics": topics, "error_code": errors.NONE}


async def handle(broker: Broker, request: Any) -> bytes:
    groups = [await _group(broker, request, g) for g in request.body.groups]
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "groups": groups}
    )
