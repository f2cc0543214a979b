"""ShareFetch (key 78), v1-v2: acquire records for a share-group member, with
piggy-backed acknowledgements, inside a share session (sidecar/share/sessions.py).

Order of work, as in Kafka: check the session epoch (SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH), apply the acknowledgements (per partition
AcknowledgeErrorCode), then acquire from the session's partitions, up to MaxRecords
and MaxBytes, long-polling up to MaxWaitMs on the partitions' append/release wake-up
when nothing is available. Epoch -1 acknowledges, closes the session and releases the
member's unacknowledged records on its partitions; a fetch with IsRenewAck only
acknowledges.
Needs READ on the group (else GROUP_AUTHORIZATION_FAILED, nothing done) and READ on
each topic (else TOPIC_AUTHORIZATION_FAILED per partition, which joins no session), as
in Kafka."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.share import records, state
from sidecar.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, SessionError
from sidecar.storage import keys
from sidecar.storage.store import TopicInfo

API_KEY = 78
MIN_VERSION = 1
MAX_VERSION = 2

DEFAULT_MAX_RECORDS = 500
NO_LEADER = {"leader_id": -1, "leader_epoch": -1}


def _top_error(version: int, code: str, message: str | None, lock_ms: int = 0) -> bytes:
    return encode_response(
        API_KEY,
        version,
        {
            "throttle_time": 0,
            "error_code": errors.code(code),
            "error_message": message,
            "acquisition_lock_timeout": lock_ms,
            "responses": [],
            "node_endpoints": [],
        },
    )


async def _topics(broker: Broker, ids: set[uuid.UUID]) -> dict[uuid.UUID, TopicInfo | None]:
    return {tid: await broker.store.topic_by_id(tid) for tid in ids}


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    version = request.header.api_version
    group_id, member_id, epoch = body.group_id or "", body.member_id or "", body.share_session_epoch
    if not checks.group_allowed(broker, request, Operation.READ, group_id):
        return _top_error(version, "GROUP_AUTHORIZATION_FAILED", None)
    if not group_id:
        return _top_error(version, "INVALID_REQUEST", "Group ID is required.")
    if not member_id:
        return _top_error(version, "INVALID_REQUEST", "Member ID is required.")
    share = state(broker)
    acks_present = any(p.acknowledgement_batches for t in body.topics for p in t.partitions)
    try:
        if epoch == INITIAL_EPOCH:
            if acks_present:
                return _top_error(
                    version, "INVALID_REQUEST", "Acknowledge data present on initial fetch."
                )
            session = share.sessions.open(group_id, member_id)
        elif epoch == FINAL_EPOCH:
            session = share.sessions.get(group_id, member_id)
            if session is None:
                raise SessionError(
                    "SHARE_SESSION_NOT_FOUND", f"Share session for member {member_id} not found."
                )
        else:
            session = share.sessions.advance(group_id, member_id, epoch)
    except SessionError as exc:
        return _top_error(version, exc.code, exc.message)

    for t in body.forgotten_topics_data:
        for p in t.partitions:
            session.partitions.pop((t.topic_id, p), None)
    wanted_ids = {t.topic_id for t in body.topics} | {tid for tid, _ in session.partitions}
    infos = await _topics(broker, {t for t in wanted_ids if t is not None})
    readable = checks.allowed_topics(
        broker, request, Operation.READ, (i.name for i in infos.values() if i is not None)
    )
    # topic id -> partition -> response entry
    out: dict[Any, dict[int, dict[str, Any]]] = {}

    def entry(tid: Any, p: int) -> dict[str, Any]:
        return out.setdefault(tid, {}).setdefault(
            p,
            {
                "partition_index": p,
                "error_code": errors.NONE,
                "acknowledge_error_code": errors.NONE,
                "current_leader": NO_LEADER,
                "records": b"",
                "acquired_records": [],
            },
        )

    renew_only = version >= 2 and body.is_renew_ack
    for t in body.topics:
        info = infos.get(t.topic_id) if t.topic_id else None
        for p in t.partitions:
            e = entry(t.topic_id, p.partition_index)
            if info is not None and info.name not in readable:
                e["error_code"] = checks.TOPIC_AUTHORIZATION_FAILED
                continue
            if info is None or not 0 <= p.partition_index < info.partitions:
                e["error_code"] = errors.code(
                    "UNKNOWN_TOPIC_ID" if info is None else "UNKNOWN_TOPIC_OR_PARTITION"
                )
                continue
            if epoch != FINAL_EPOCH:
                session.partitions[(t.topic_id, p.partition_index)] = None
            if p.acknowledgement_batches:
                ack = await records.acknowledge(
                    broker,
                    group_id,
                    member_id,
                    info.name,
                    p.partition_index,
                    p.acknowledgement_batches,
                    allow_renew=version >= 2,
                )
                e["acknowledge_error_code"] = ack.error
                e["acknowledge_error_message"] = ack.message

    if epoch == FINAL_EPOCH:
        closed = share.sessions.close(group_id, member_id)
        if closed is not None:  # the member's records on the session's partitions go back
            await share.close_session(closed)
    elif not renew_only:
        fetchable = []
        for tid, p in session.partitions:
            info = infos.get(tid)
            if info is None:
                entry(tid, p)["error_code"] = errors.code("UNKNOWN_TOPIC_ID")
            elif info.name not in readable:
                entry(tid, p)["error_code"] = checks.TOPIC_AUTHORIZATION_FAILED
            elif 0 <= p < info.partitions:
                fetchable.append((tid, p, info))
        if fetchable and body.max_bytes > 0:  # as Kafka, MaxBytes 0 acquires nothing
            await _acquire(broker, body, group_id, member_id, fetchable, entry)
    lock_ms = await records.lock_ms(broker, group_id)

    responses = [
        {"topic_id": tid, "partitions": list(parts.values())} for tid, parts in out.items()
    ]
    return encode_response(
        API_KEY,
        version,
        {
            "throttle_time": 0,
            "error_code": errors.NONE,
            "acquisition_lock_timeout": lock_ms,
            "responses": responses,
            "node_endpoints": [],
        },
    )


async def _acquire(
    broker: Broker,
    body: Any,
    group_id: str,
    member_id: str,
    fetchable: list[tuple[Any, int, TopicInfo]],
    entry: Any,
) -> None:
    """Acquire into the response entries; long-poll while nothing is available."""
    max_records = body.max_records if body.max_records > 0 else DEFAULT_MAX_RECORDS
    max_wait = body.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait
    channels = [keys.wake_channel(info.name, p) for _, p, info in fetchable]
    event = broker.wakeups.register(channels) if max_wait > 0 else None
    # Start at a rotating partition, so one busy partition does not starve the others.
    start = hash((group_id, member_id, int(time.monotonic() * 10))) % len(fetchable)
    order = fetchable[start:] + fetchable[:start]
    try:
        while True:
            if event:
                event.clear()
            left, budget, got = max_records, body.max_bytes, 0
            for tid, p, info in order:
                if left <= 0 or budget <= 0:
                    break
                res = await records.acquire(broker, group_id, member_id, info, p, left, budget)
                e = entry(tid, p)
                if res.error:
                    e["error_code"], e["error_message"] = res.error, res.message
                    continue
                if res.count:
                    e["records"] = res.records
                    e["acquired_records"] = res.acquired
                    left -= res.count
                    budget -= len(res.records)
                    got += res.count
            remaining = deadline - time.monotonic()
            if got or event is None or remaining <= 0 or broker.wakeups.closing:
                return
            # The group exists now (acquire creates it): its lock duration is known.
            recheck = max(await records.lock_ms(broker, group_id), 1000) / 4000
            try:
                # Expiring locks publish nothing: look again every lock/4 (as the HTTP
                # read does), and once more when the wait ends.
                await asyncio.wait_for(event.wait(), min(remaining, recheck))
            except TimeoutError:
                if remaining <= recheck:
                    deadline = time.monotonic()
    finally:
        if event is not None:
            broker.wakeups.unregister(event, channels)
