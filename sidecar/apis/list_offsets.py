"""ListOffsets (key 2), v0-v11: earliest (-2), latest (-1), max timestamp (-3),
earliest local (-4: the first offset in Redis, past what tiered storage archived), latest
tiered (-5, v9+: the last archived offset) and earliest pending upload (-6, v11+: the
first offset not archived yet), both -1 on a topic without remote storage as in Kafka,
and the first offset whose timestamp is >= a given time, found through the archived
segments' headers and the partition's time index. v0 answers Kafka's old
list of segment offsets instead (see _old_style_offsets). With isolation_level
read_committed, latest is the last stable offset (docs/transactions.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.protocol.primitives import Reader, array_len, pack_i16, pack_i32, pack_i64, string
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.store import StoreError
from sidecar.tiered.archiver import remote_enabled

API_KEY = 2
MIN_VERSION = 0
MAX_VERSION = 11  # v10 adds a timeout, which a lookup in Redis never needs

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


async def _lookup(
    broker: Broker, topic: str, partition: int, ts: int, read_committed: bool = False
) -> tuple[int, int]:
    store = broker.store
    if ts >= 0:
        if broker.remote is not None:
            local_start, lso = await store.meta(topic, partition, "llso", "lso")
            if local_start is not None and lso is not None and local_start > lso:
                found = await broker.remote.offset_for_time(topic, partition, ts, lso)
                if found is not None:
                    return found
        return await store.offset_for_time(topic, partition, ts)
    if ts == LATEST and read_committed:
        return await store.last_stable_offset(topic, partition), -1
    lso, hw, _, _ = await store.watermarks(topic, partition)
    if ts == LATEST:
        return hw, -1
    if ts == EARLIEST_LOCAL:
        # Tiered storage: the first offset still in Redis (KIP-1005).
        (local_start,) = await store.meta(topic, partition, "llso")
        return max(lso, local_start or 0), -1
    if ts == EARLIEST:
        return lso, -1
    if ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return await _tiered_frontier(broker, topic, partition, ts, lso)
    if ts == MAX_TIMESTAMP:
        return await store.max_timestamp(topic, partition)
    raise StoreError("INVALID_REQUEST", f"unknown timestamp spec {ts}")


async def _tiered_frontier(
    broker: Broker, topic: str, partition: int, ts: int, lso: int
) -> tuple[int, int]:
    """KIP-1005's latest tiered offset and KIP-1023's earliest pending upload, as Kafka's
    UnifiedLog answers them. Archiving and trimming Redis are one step (lua/archive.lua),
    so the last archived offset is the local log start - 1."""
    info = await broker.store.get_topic(topic)
    if broker.remote is None or info is None or not remote_enabled(info):
        return -1, -1
    (local_start,) = await broker.store.meta(topic, partition, "llso")
    highest = int(local_start) - 1 if local_start else -1
    if ts == LATEST_TIERED:
        return highest, -1
    # Nothing archived yet: everything from the log start is pending.
    return (lso if highest < 0 else max(highest + 1, lso)), -1


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    # Kafka: DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED per partition.
    described = checks.allowed_topics(
        broker, request, Operation.DESCRIBE, (t.name for t in request.body.topics)
    )
    if version == 0:
        return await _handle_v0(broker, request.body, described)
    read_committed = getattr(request.body, "isolation_level", 0) == 1  # v2+
    topics_out = []
    for t in request.body.topics:
        info = await broker.store.get_topic(t.name) if t.name in described else None
        parts_out = []
        for p in t.partitions:
            entry: dict[str, Any] = {
                "partition_index": p.partition_index,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            if t.name not in described:
                entry["error_code"] = checks.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                entry["error_code"] = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif p.timestamp == MAX_TIMESTAMP and version < 7:
                entry["error_code"] = errors.UNSUPPORTED_VERSION  # as Kafka answers
            else:
                try:
                    offset, ts = await _lookup(
                        broker, t.name, p.partition_index, p.timestamp, read_committed
                    )
                    entry.update(error_code=errors.NONE, offset=offset, timestamp=ts)
                except StoreError as exc:
                    entry["error_code"] = errors.code(exc.code)
            parts_out.append(entry)
        topics_out.append({"name": t.name, "partitions": parts_out})
    return encode_response(API_KEY, version, {"throttle_time": 0, "topics": topics_out})


# -- v0: kio 0.6.5 has no schema for it ------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyPartition:
    partition_index: int
    timestamp: int
    max_num_offsets: int


@dataclass(frozen=True, slots=True)
class LegacyTopic:
    name: str
    partitions: tuple[LegacyPartition, ...]


@dataclass(frozen=True, slots=True)
class LegacyListOffsetsRequest:
    replica_id: int
    topics: tuple[LegacyTopic, ...]


def decode_v0(buf: bytes, pos: int) -> LegacyListOffsetsRequest:
    r = Reader(buf, pos)
    replica_id = r.i32()
    topics = r.array(
        lambda: LegacyTopic(r.string(), r.array(lambda: LegacyPartition(r.i32(), r.i64(), r.i32())))
    )
    return LegacyListOffsetsRequest(replica_id, topics)


DECODERS = {0: decode_v0}


async def _old_style_offsets(
    broker: Broker, topic: str, partition: int, ts: int, max_num: int
) -> list[int]:
    """Kafka 3.9's UnifiedLog.legacyFetchOffsetsBefore for a log of one segment. Its
    points are the segment's base offset (the log start) stamped with the segment's
    last-modified time and, when the log holds records, the log end offset stamped
    now. Latest (-1) starts at the last point, earliest (-2) at the first, any other
    value at the last point stamped at or before it (none: an empty list); the answer
    is up to max_num offsets from there down. Skiff keeps no append times, so the
    segment's time is the partition's largest record timestamp, or now when no record
    has one (an empty log, magic 0 records)."""
    lso, hw, maxts, _ = await broker.store.watermarks(topic, partition)
    if max_num < 0:  # Kafka fails with a NegativeArraySizeException
        raise StoreError("UNKNOWN_SERVER_ERROR", f"max_num_offsets {max_num}")
    now = int(time.time() * 1000)
    points = [(lso, maxts if maxts >= 0 else now)]
    if hw > lso:
        points.append((hw, now))
    if ts == LATEST:
        start = len(points) - 1
    elif ts == EARLIEST:
        start = 0
    else:
        start = max((i for i, (_, at) in enumerate(points) if at <= ts), default=-1)
    return [points[i][0] for i in range(start, -1, -1)][:max_num]


async def _handle_v0(broker: Broker, body: LegacyListOffsetsRequest, described: set[str]) -> bytes:
    parts = [array_len(len(body.topics), False)]
    for t in body.topics:
        info = await broker.store.get_topic(t.name) if t.name in described else None
        parts.append(string(t.name, False) + array_len(len(t.partitions), False))
        for p in t.partitions:
            offsets: list[int] = []
            if t.name not in described:
                error = checks.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                error = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif p.timestamp < EARLIEST:
                error = errors.UNSUPPORTED_VERSION  # as Kafka answers any other spec in v0
            else:
                try:
                    offsets = await _old_style_offsets(
                        broker, t.name, p.partition_index, p.timestamp, p.max_num_offsets
                    )
                    error = errors.NONE
                except StoreError as exc:
                    error = errors.code(exc.code)
            parts.append(pack_i32(p.partition_index) + pack_i16(error))
            parts.append(array_len(len(offsets), False) + b"".join(map(pack_i64, offsets)))
    return b"".join(parts)
