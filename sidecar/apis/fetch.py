"""Fetch (key 1), v0-v18 (topic ids from v13; v0-v3 answer with legacy message
sets, magic 0 for v0-v1 and magic 1 for v2-v3, see protocol/message_set.py).

Per request, one MULTI/EXEC reads every partition's watermarks and records (XRANGE
from the fetch offset), so batches start exactly at the requested offset. Long polls
wait on the append script's wake-up, registered before the read so no append is
missed. A long poll whose every partition is at its high watermark as the wake-ups and
earlier reads left it (longpoll.WatermarkCache) does not read at all: it waits, and
answers those watermarks unless woken. Sessions are not kept (session_id 0): clients
then send full fetches. The response is hand-encoded.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sidecar import connection_context
from sidecar.broker import Broker
from sidecar.config.topic import fetch_compression
from sidecar.protocol import errors, message_set, stored_batch
from sidecar.protocol.primitives import (
    EMPTY_TAGS,
    Reader,
    array_len,
    nbytes,
    pack_i16,
    pack_i32,
    pack_i64,
    string,
    uvarint,
)
from sidecar.protocol.record_batch import encode_entries_sized
from sidecar.quotas import CONSUMER_BYTE_RATE
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage import keys, resilience
from sidecar.storage.resilience import RedisUnavailable
from sidecar.storage.store import StoreError, TopicInfo
from sidecar.telemetry import requests as telemetry
from sidecar.tiered.remote_log import RemoteReadError

API_KEY = 1
MIN_VERSION = 0
MAX_VERSION = 18  # v16-v18 add fields only leaders and raft followers use

MAX_RECORDS_PER_READ = 5000
MAX_BATCHES_PER_READ = 500  # `batch` topics: stream entries are produced batches
_LOOKUP_ERRORS = (errors.UNKNOWN_TOPIC_OR_PARTITION, errors.UNKNOWN_TOPIC_ID)
_avg_record_bytes: dict[tuple[str, int], float] = {}  # sizing XRANGE COUNT, a cache only
# Tiered storage: each partition's local log start as last read (a hint for XRANGE COUNT).
_local_start: dict[tuple[str, int], int] = {}
_remote_log = logging.getLogger(__name__)


class PartitionFetch:
    __slots__ = (
        "index",
        "offset",
        "max_bytes",
        "error",
        "hw",
        "lso",
        "stable",
        "aborted",
        "records",
        "count",
    )

    def __init__(self, index: int, offset: int, max_bytes: int, error: int = errors.NONE) -> None:
        self.index = index
        self.offset = offset
        self.max_bytes = max_bytes
        self.error = error
        self.hw = -1
        self.lso = -1  # log start offset
        self.stable = -1  # last stable offset
        # read_committed: (producer id, first offset) of aborted transactions to skip
        self.aborted: list[tuple[int, int]] = []
        # bytes, or the stored batches' chunks (stored_batch.serve) on `batch` topics
        self.records: bytes | list[Any] = b""
        self.count = 0  # records in self.records


class TopicFetch:
    __slots__ = ("name", "topic_id", "info", "partitions")

    def __init__(self, name: str, topic_id: uuid.UUID | None, info: TopicInfo | None) -> None:
        self.name = name
        self.topic_id = topic_id
        self.info = info
        self.partitions: list[PartitionFetch] = []


def _from_follower(body: Any) -> bool:
    state = getattr(body, "replica_state", None)  # v15+
    replica_id = state.replica_id if state is not None else getattr(body, "replica_id", -1)
    return replica_id >= 0


async def _resolve(broker: Broker, request: Any, version: int) -> list[TopicFetch]:
    topics = []
    # Kafka: a follower's fetch needs CLUSTER_ACTION on the cluster (for every partition),
    # a consumer's READ on each topic.
    follower = _from_follower(request.body)
    replicating = follower and checks.cluster_allowed(broker, request, Operation.CLUSTER_ACTION)
    for t in request.body.topics:
        if version >= 13:
            # kio reads the zero UUID (no id known to the client) as None.
            info = await broker.store.topic_by_id(t.topic_id)
            missing = errors.UNKNOWN_TOPIC_ID
            tf = TopicFetch(info.name if info else "", t.topic_id, info)
        else:
            info = await broker.store.get_topic(t.topic)
            missing = errors.UNKNOWN_TOPIC_OR_PARTITION
            tf = TopicFetch(t.topic, info.topic_id if info else None, info)
        # Kafka: READ on the topic, asked before whether it exists (an unknown topic id
        # has no name to ask about: UNKNOWN_TOPIC_ID).
        if follower:
            denied = not replicating
        else:
            denied = bool(tf.name) and not checks.topic_allowed(
                broker, request, Operation.READ, tf.name
            )
        for p in t.partitions:
            ok = info is not None and 0 <= p.partition < info.partitions
            tf.partitions.append(
                PartitionFetch(
                    p.partition,
                    p.fetch_offset,
                    p.partition_max_bytes,
                    checks.TOPIC_AUTHORIZATION_FAILED
                    if denied
                    else errors.NONE
                    if ok
                    else missing
                    if info is None
                    else errors.UNKNOWN_TOPIC_OR_PARTITION,
                )
            )
        topics.append(tf)
    return topics


async def _read_once(
    broker: Broker,
    topics: list[TopicFetch],
    max_bytes: int,
    magic: int = 2,
    read_committed: bool = False,
) -> int:
    """Fill every partition's watermarks and records (v2 batches, or message sets of
    `magic` 0 or 1 for v0-v3); return the bytes gathered. read_committed: records up
    to the last stable offset only, with the aborted transactions among them."""
    wanted = [(t, p) for t in topics for p in t.partitions if p.error == errors.NONE]
    if not wanted:
        return 0
    reads = []
    for t, p in wanted:
        limit = min(p.max_bytes, max_bytes)
        # A `batch` topic's entries are whole batches: its average is per entry.
        batches = t.info is not None and t.info.batch_format
        avg = _avg_record_bytes.get((t.name, p.index), 16384.0 if batches else 200.0)
        most = MAX_BATCHES_PER_READ if batches else MAX_RECORDS_PER_READ
        count = max(1, min(most, int(limit / avg) + 1))
        if p.offset < _local_start.get((t.name, p.index), -1):
            count = 1  # archived: read from the object store, the watermarks from Redis
        reads.append((t.name, p.index, max(p.offset, 0), count))
    # What the read finds is kept for later long polls (unless a wake-up overtook it).
    cache = broker.wakeups.watermarks
    channels = [keys.wake_channel(t.name, p.index).encode() for t, p in wanted]
    marks = cache.begin(channels)
    seen: list[tuple[int, int, int]] | None = None
    try:
        results = await broker.store.read(reads)
        seen = [(r.high_watermark, r.log_start_offset, r.stable) for r in results]
    except RedisUnavailable:
        # Retriable for every client: it refreshes metadata and fetches again.
        for _, p in wanted:
            p.error = errors.NOT_LEADER_OR_FOLLOWER
            p.hw = p.lso = p.stable = -1
        return 0
    except StoreError:
        # A topic deleted under us: look each partition up again next time.
        for _, p in wanted:
            p.error = errors.UNKNOWN_TOPIC_OR_PARTITION
        return 0
    finally:
        cache.done(channels, marks, seen)
    budget = max_bytes
    total = 0
    for (t, p), r in zip(wanted, results, strict=True):
        p.hw, p.lso, p.stable = r.high_watermark, r.log_start_offset, r.stable
        p.records = b""
        p.count = 0
        p.aborted = []
        if p.offset < r.log_start_offset or p.offset > r.high_watermark:
            p.error = errors.OFFSET_OUT_OF_RANGE
            p.hw = p.lso = p.stable = -1  # as Kafka reports a failed partition read
            continue
        entries = r.entries
        if p.offset < r.local_start:
            # Tiered storage: archived, read from the object store.
            _local_start[(t.name, p.index)] = r.local_start
            try:
                entries = await _remote(broker, t.name, p.index, p.offset, p.max_bytes)
            except RemoteReadError as exc:
                _remote_log.warning("fetch %s-%d at %d: %s", t.name, p.index, p.offset, exc)
                p.error = errors.KAFKA_STORAGE_ERROR
                p.hw = p.lso = p.stable = -1
                continue
        if read_committed and r.stable < r.high_watermark:
            entries = _below(entries, r.stable)
        stored = entries
        if not entries or (budget <= 0 and total > 0):
            continue
        if read_committed and r.last_abort >= p.offset:
            p.aborted = [
                a for a in await broker.store.aborted(t.name, p.index, p.offset) if a[1] < r.stable
            ]
        # The request limit applies to the first partition too (its first record is
        # always returned).
        limit = min(p.max_bytes, budget)
        if t.info is not None and t.info.batch_format:
            if magic == 2:
                # As Kafka (minOneMessage): only the first partition with data gets its
                # first batch whatever its size.
                chunks, taken, size = stored_batch.serve(entries, limit, total == 0)
                if chunks:
                    _avg_record_bytes[(t.name, p.index)] = size / (len(chunks) // 2)
                # Left as chunks: the response frame is joined once (framing.py), so the
                # stored bytes are copied once on their way to the socket.
                p.records = chunks
                p.count = taken
                budget -= size
                total += size
                continue
            # Fetch v0-v3: down-converted record by record, as Kafka does.
            entries = stored_batch.record_entries(entries, p.offset)
            if not entries:
                continue
        if magic == 2:
            # Compressed as the topic's compression.type says; `raw` is the uncompressed
            # size the limit applies to.
            data, taken, raw = encode_entries_sized(entries, limit, fetch_compression(t.info))
        else:
            data, taken = message_set.encode_entries(entries, limit, magic)
            raw = len(data)
        if taken and entries is stored:
            _avg_record_bytes[(t.name, p.index)] = raw / taken
        p.records = data
        p.count = taken
        budget -= len(data)
        total += len(data)
    return total


async def _remote(
    broker: Broker, topic: str, partition: int, offset: int, max_bytes: int
) -> list[Any]:
    if broker.remote is None:
        raise RemoteReadError(
            "the topic has archived batches, but this sidecar has no --remote-storage"
        )
    return await broker.remote.read(topic, partition, offset, max_bytes)


def _below(entries: list[Any], stable: int) -> list[Any]:
    """The entries of a raw XRANGE reply that end below the last stable offset (IDs are
    0-<last offset + 1>, in order)."""
    for i, (entry_id, _) in enumerate(entries):
        if int(entry_id[2:]) > stable:
            return entries[:i]
    return entries


def _at_end(broker: Broker, topics: list[TopicFetch], read_committed: bool = False) -> bool:
    """Every partition fetches from its high watermark (read_committed: its last stable
    offset) as last published or read: fill in what a read would answer (no records,
    those watermarks) and say so."""
    cache = broker.wakeups.watermarks
    found = []
    for t in topics:
        for p in t.partitions:
            marks = cache.get(keys.wake_channel(t.name, p.index).encode())
            if p.error or marks is None or p.offset != marks[2 if read_committed else 0]:
                return False
            found.append((p, marks))
    for p, (hw, lso, stable) in found:
        p.hw, p.lso, p.stable, p.records, p.count = hw, lso, stable, b"", 0
    return True


async def handle(broker: Broker, request: Any) -> list[Any]:
    body = request.body
    version = request.header.api_version
    topics = await _resolve(broker, request, version)
    user, client_id = request.security.principal.name, request.header.client_id or ""
    # Kafka: a consumer_byte_rate quota caps a fetch at what the quota's window holds.
    max_bytes, min_bytes = body.max_bytes, body.min_bytes
    window = broker.quotas.max_value_in_window(CONSUMER_BYTE_RATE, user, client_id)
    if window is not None:
        max_bytes = min(max_bytes, int(min(window, 2**31 - 1)))
        min_bytes = min(min_bytes, max_bytes)
    max_wait = body.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait
    channels = [
        keys.wake_channel(t.name, p.index)
        for t in topics
        for p in t.partitions
        if p.error == errors.NONE
    ]
    event = broker.wakeups.register(channels) if max_wait > 0 and channels else None
    # Registered first: a wake-up from here on sets the event, and one before is in the
    # cache already.
    read_committed = body.isolation_level == 1
    cached = (
        event is not None and not broker.wakeups.closing and _at_end(broker, topics, read_committed)
    )
    try:
        while True:
            if event:
                event.clear()
            if cached:
                total = 0  # idle: no Redis round trip (see _at_end)
            else:
                total = await _read_once(broker, topics, max_bytes, _magic(version), read_committed)
            remaining = deadline - time.monotonic()
            has_error = any(p.error for t in topics for p in t.partitions)
            if (
                total >= max(min_bytes, 1)
                or has_error
                or remaining <= 0
                or event is None
                or broker.wakeups.closing  # shutting down: answer with what we have
            ):
                break
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                if cached and (event.is_set() or not _at_end(broker, topics, read_committed)):
                    # Woken (or the cache dropped) as the wait ended: read after all.
                    await _read_once(broker, topics, max_bytes, _magic(version), read_committed)
                break  # the last read stands: nothing was appended since
            cached = False  # woken: read as usual
            if broker.wakeups.closing:
                break  # shutting down: answer now with the last read
            # The next read gets its own Redis retry time, not what the wait left.
            resilience.rearm_deadline(resilience.POLICY.budget_s)
    finally:
        if event:
            broker.wakeups.unregister(event, channels)
    answer = _encode(version, topics, read_committed)
    # Kafka records the response's size against consumer_byte_rate; over the quota it
    # takes it back and answers with no partitions, the throttle time set (KIP-219).
    throttle_ms = broker.quotas.record(CONSUMER_BYTE_RATE, user, client_id, _size(answer))
    if throttle_ms > 0:
        broker.quotas.unrecord(CONSUMER_BYTE_RATE, user, client_id, _size(answer))
        connection_context.mute(throttle_ms)
        return _encode(version, [], read_committed, throttle_ms)
    for t in topics:
        for p in t.partitions:
            telemetry.fetched(t.name, p.index, p.count, _size(p.records), p.error)
    return answer


def _size(parts: bytes | list[Any]) -> int:
    return len(parts) if isinstance(parts, bytes) else sum(map(len, parts))


def _encode(
    version: int, topics: list[TopicFetch], read_committed: bool, throttle_ms: int = 0
) -> list[Any]:
    """The response body as parts (framing.response_frame joins them once): stored
    batches go from the Redis reply to the frame without an intermediate copy."""
    if version < 4:
        return _encode_legacy(version, topics, throttle_ms)
    flexible = version >= 12
    parts = [pack_i32(throttle_ms)]
    if version >= 7:
        parts.append(pack_i16(errors.NONE) + pack_i32(0))  # error_code, session_id
    parts.append(array_len(len(topics), flexible))
    for t in topics:
        if version >= 13:
            parts.append((t.topic_id or uuid.UUID(int=0)).bytes)
        else:
            parts.append(string(t.name, flexible))
        parts.append(array_len(len(t.partitions), flexible))
        for p in t.partitions:
            stable = p.stable if p.stable >= 0 else p.hw
            parts.append(pack_i32(p.index) + pack_i16(p.error) + pack_i64(p.hw) + pack_i64(stable))
            if version >= 5:
                parts.append(pack_i64(p.lso))
            # As Kafka: a list for read_committed and for partitions it could not look
            # up, null for other read_uncommitted answers (out-of-range ones included).
            if read_committed and p.aborted:
                parts.append(array_len(len(p.aborted), flexible))
                for pid, first in p.aborted:
                    parts.append(pack_i64(pid) + pack_i64(first))
                    if flexible:
                        parts.append(EMPTY_TAGS)
            else:
                aborted = 0 if read_committed or p.error in _LOOKUP_ERRORS else None
                parts.append(array_len(aborted, flexible))
            if version >= 11:
                parts.append(pack_i32(-1))  # preferred_read_replica
            if isinstance(p.records, bytes):
                parts.append(nbytes(p.records, flexible))
            else:
                size = _size(p.records)
                parts.append(uvarint(size + 1) if flexible else pack_i32(size))
                parts.extend(p.records)
            if flexible:
                parts.append(EMPTY_TAGS)
        if flexible:
            parts.append(EMPTY_TAGS)
    if flexible:
        parts.append(EMPTY_TAGS)
    return parts


# -- v0-v3: kio 0.6.5 has no schema for them ------------------------------------------

NO_REQUEST_LIMIT = 2**31 - 1  # v0-v2 have no request-level max_bytes (Kafka: Int.MaxValue)


def _magic(version: int) -> int:
    """The message format a Fetch version reads: v0-v1 magic 0, v2-v3 magic 1."""
    return 2 if version >= 4 else 1 if version >= 2 else 0


@dataclass(frozen=True, slots=True)
class LegacyFetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int


@dataclass(frozen=True, slots=True)
class LegacyFetchTopic:
    topic: str
    partitions: tuple[LegacyFetchPartition, ...]


@dataclass(frozen=True, slots=True)
class LegacyFetchRequest:
    """Named like kio's FetchRequest, so one handler serves every version."""

    replica_id: int
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    topics: tuple[LegacyFetchTopic, ...]
    isolation_level: int = 0


def _decoder(version: int) -> Callable[[bytes, int], LegacyFetchRequest]:
    def decode(buf: bytes, pos: int) -> LegacyFetchRequest:
        r = Reader(buf, pos)
        replica_id = r.i32()
        max_wait = datetime.timedelta(milliseconds=r.i32())
        min_bytes = r.i32()
        max_bytes = r.i32() if version >= 3 else NO_REQUEST_LIMIT
        topics = r.array(
            lambda: LegacyFetchTopic(
                r.string(),
                r.array(lambda: LegacyFetchPartition(r.i32(), r.i64(), r.i32())),
            )
        )
        return LegacyFetchRequest(replica_id, max_wait, min_bytes, max_bytes, topics)

    return decode


DECODERS = {v: _decoder(v) for v in range(4)}


def _encode_legacy(version: int, topics: list[TopicFetch], throttle_ms: int = 0) -> list[Any]:
    parts = [pack_i32(throttle_ms)] if version >= 1 else []  # throttle_time_ms from v1
    parts.append(array_len(len(topics), False))
    for t in topics:
        parts.append(string(t.name, False))
        parts.append(array_len(len(t.partitions), False))
        for p in t.partitions:
            parts.append(pack_i32(p.index) + pack_i16(p.error) + pack_i64(p.hw))
            parts.append(nbytes(p.records, False))  # type: ignore[arg-type]
    return parts
