"""Acquisition and acknowledgement for share groups on the queue core.

A share member is a lease holder of the queue core (sidecar/queues/core.py) under its
member id, so Kafka share consumers and HTTP workers of one group id share one state:
a record leased to either is handed to no one else while the lease lasts.

Acknowledgement batches (first offset, last offset, types) become per-offset actions:
0 gap (nothing to do), 1 accept, 2 release, 3 reject, 4 renew. On `record` topics the
acquired records are encoded as one v2 batch (the topic's compression.type, as Fetch
does) built from the acquired records only; on `batch` topics the stored batches holding
them are sent as stored (queues/core.py acquire_batches), as Kafka sends them, and the
client keeps the records AcquiredRecords names. Either way AcquiredRecords are ranges of
consecutive offsets with one delivery count."""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sidecar.config.topic import fetch_compression
from sidecar.protocol import errors
from sidecar.protocol.record_batch import Compression, DefaultRecordBatchBuilder, _finish
from sidecar.queues.core import (
    Acquired,
    Action,
    QueueError,
    QueueStore,
    RecordError,
    queue_store,
)
from sidecar.storage.store import TopicInfo

log = logging.getLogger("skiff.share")

GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
ACTIONS = {
    ACCEPT: Action.ACCEPT,
    RELEASE: Action.RELEASE,
    REJECT: Action.REJECT,
    RENEW: Action.RENEW,
}
INVALID_RECORD_STATE = errors.code("INVALID_RECORD_STATE")
INVALID_REQUEST = errors.code("INVALID_REQUEST")


def queues(broker: Any) -> QueueStore:
    """The sidecar's queue core, shared with the HTTP API and OffsetFetch."""
    return queue_store(broker)


async def release_member(broker: Any, group_id: str, member_id: str) -> None:
    try:
        n = await queues(broker).release_holder(group_id, member_id)
    except QueueError:
        return  # not a queue group (yet): nothing was acquired
    if n:
        log.info("share group %r: released %d record(s) of member %s", group_id, n, member_id)


async def lock_ms(broker: Any, group_id: str) -> int:
    """The group's acquisition lock duration (0 when it is no queue group yet)."""
    try:
        return (await queues(broker).config(group_id)).lock_ms
    except QueueError:
        return 0


async def release_partitions(
    broker: Any, group_id: str, member_id: str, partitions: list[tuple[str, int]]
) -> None:
    """Release what the member holds on these partitions (its share session there
    closed), leaving what it acquired through other sidecars' sessions alone."""
    core = queues(broker)
    released = 0
    for topic, partition in partitions:
        while True:
            offsets = await core.held(group_id, member_id, topic, partition)
            if not offsets:
                break
            try:
                done = await core.settle(
                    group_id, member_id, topic, partition, offsets, Action.RELEASE
                )
            except QueueError:
                break
            n = sum(1 for e in done.values() if e is None)
            released += n
            if len(offsets) < 1000 or n == 0:  # the rest: locks expired, free already
                break
    if released:
        log.info(
            "share group %r: released %d record(s) of member %s's closed session",
            group_id,
            released,
            member_id,
        )


@dataclass(slots=True)
class AckResult:
    error: int = errors.NONE
    message: str | None = None


def parse_batches(batches: Any, allow_renew: bool) -> dict[Action | None, list[int]] | str:
    """Acknowledgement batches as offsets per action (None: gaps), or the reason they
    are invalid."""
    out: dict[Action | None, list[int]] = defaultdict(list)
    last_seen = -1
    for b in batches:
        first, last, types = b.first_offset, b.last_offset, list(b.acknowledge_types)
        if first < 0 or last < first:
            return f"Invalid acknowledgement batch {first}-{last}."
        if first <= last_seen:
            return "Acknowledgement batches overlap or are out of order."
        last_seen = last
        n = last - first + 1
        if len(types) not in (1, n):
            return "AcknowledgeTypes must have one type or one per offset."
        for t in types:
            if t not in (GAP, *ACTIONS) or (t == RENEW and not allow_renew):
                return f"Invalid acknowledge type {t}."
        if n > 1_000_000:
            return "Acknowledgement batch too large."
        if len(types) == 1:  # the usual case: one type for the whole range
            t = types[0]
            out[ACTIONS[t] if t != GAP else None].extend(range(first, last + 1))
            continue
        for i, t in enumerate(types):
            out[ACTIONS[t] if t != GAP else None].append(first + i)
    return out


async def acknowledge(
    broker: Any,
    group_id: str,
    member_id: str,
    topic: str,
    partition: int,
    batches: Any,
    allow_renew: bool,
) -> AckResult:
    parsed = parse_batches(batches, allow_renew)
    if isinstance(parsed, str):
        return AckResult(INVALID_REQUEST, parsed)
    core = queues(broker)
    bad: list[int] = []
    not_pending: list[int] = []
    try:
        for action, offsets in parsed.items():
            # A gap is an offset the client saw no record at. Kafka archives it: one
            # this member holds is finished; any other is left alone, without an error.
            act = Action.ACCEPT if action is None else action
            settled = await core.settle(group_id, member_id, topic, partition, offsets, act)
            if action is None:
                continue
            for o, err in settled.items():
                if err is RecordError.NOT_PENDING:
                    not_pending.append(o)
                elif err is not None:
                    bad.append(o)
        if not_pending:
            # As Kafka: offsets below the group's start offset are finished already and
            # their acknowledgements ignored; offsets past every record handed out are
            # not in flight at all (INVALID_REQUEST).
            st = await core.partition_state(group_id, topic, partition, scan=0)
            start, end = (st.committed, st.next_offset) if st else (-1, 0)
            if any(o >= end for o in not_pending):
                return AckResult(
                    INVALID_REQUEST,
                    "Batch record not found. The request batch offsets are not found in the cache.",
                )
            bad += [o for o in not_pending if o >= start]
    except QueueError as exc:
        if exc.code == "GROUP_NOT_FOUND":
            return AckResult(INVALID_RECORD_STATE, "The records are not acquired by this member.")
        return AckResult(errors.code(exc.code), exc.message)
    if bad:
        shown = ", ".join(str(o) for o in sorted(bad)[:10])
        return AckResult(
            INVALID_RECORD_STATE,
            f"Record(s) {shown} are not acquired by member {member_id} (not delivered to "
            "it, already acknowledged, or their acquisition lock expired).",
        )
    return AckResult()


@dataclass(slots=True)
class PartitionRecords:
    records: bytes = b""
    acquired: list[dict[str, int]] = field(default_factory=list)
    count: int = 0
    error: int = errors.NONE
    message: str | None = None


def encode_acquired(got: list[Acquired], compression: Compression) -> bytes:
    """The acquired records (sorted by offset) as one v2 batch: offset deltas skip what
    was not acquired, as compaction leaves gaps. Compressed as the topic's
    compression.type says (producer: uncompressed, the record's codec is not known)."""
    builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 2**31 - 1)
    append = builder.append
    base = got[0].offset
    for r in got:
        append(r.offset - base, r.timestamp, r.key, r.value, r.headers)
    codec = max(compression.codec, 0)
    return bytes(_finish(builder, base, False, codec, compression.level(codec) if codec else 0))


def _ranges(got: list[tuple[int, int]]) -> list[dict[str, int]]:
    """AcquiredRecords: runs of consecutive (offset, delivery count)s with one count."""
    out: list[dict[str, int]] = []
    for offset, count in got:
        last = out[-1] if out else None
        if last and last["last_offset"] == offset - 1 and last["delivery_count"] == count:
            last["last_offset"] = offset
        else:
            out.append({"first_offset": offset, "last_offset": offset, "delivery_count": count})
    return out


async def acquire(
    broker: Any,
    group_id: str,
    member_id: str,
    info: TopicInfo,
    partition: int,
    max_records: int,
    max_bytes: int,
) -> PartitionRecords:
    core = queues(broker)
    try:
        await core.config(group_id, create=True)
        if info.batch_format:
            offsets, batches = await core.acquire_batches(
                group_id, member_id, info.name, partition, max_records, max_bytes
            )
            return PartitionRecords(b"".join(batches), _ranges(offsets), len(offsets))
        got = await core.acquire(group_id, member_id, info.name, partition, max_records, max_bytes)
    except QueueError as exc:
        code = (
            errors.code(exc.code)
            if exc.code != "GROUP_ID_CONFLICT"
            else errors.code("INVALID_GROUP_ID")
        )
        return PartitionRecords(error=code, message=exc.message)
    if not got:
        return PartitionRecords()
    got.sort(key=lambda r: r.offset)
    data = encode_acquired(got, fetch_compression(info))
    return PartitionRecords(data, _ranges([(r.offset, r.delivery_count) for r in got]), len(got))
