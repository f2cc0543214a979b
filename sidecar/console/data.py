"""The console's Redis reads (docs/console.md). Each is bounded by what one page shows,
not by the number of topics or groups: a topics page is HKEYS of the registry, one
HMGET of the page's topics and one pipelined HMGET per partition shown (at most
MAX_PARTITIONS_SHOWN); a record page reads at most PAGE_RECORDS records."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from sidecar.admin.wire import decode_assignment
from sidecar.protocol.record_batch import FLAG_KEY_NULL, FLAG_VALUE_NULL, decode_headers
from sidecar.storage import keys
from sidecar.storage.group_store import CommittedOffset, split_field

PAGE_TOPICS = 50
PAGE_RECORDS = 50
PAGE_GROUPS = 100
MAX_PARTITIONS_SHOWN = 1000  # watermarks read per topics page at most
T, K, V, H, F = 1, 3, 5, 7, 9  # a record-format entry's field values (queues/core.py)


@dataclass(slots=True)
class TopicRow:
    name: str
    partitions: int
    storage_format: str
    records: int | None  # sum over partitions of hw - lso; None: not read (too many)
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


async def topic_names(redis: Any) -> list[str]:
    """Every topic's name, sorted: one HKEYS, whatever the topic count."""
    return sorted(n.decode(errors="surrogateescape") for n in await redis.hkeys(keys.TOPICS))


async def topic_rows(redis: Any, names: list[str]) -> list[TopicRow]:
    """The page's topics with their record counts: one HMGET plus one pipeline."""
    if not names:
        return []
    docs = await redis.hmget(keys.TOPICS, names)
    rows = []
    for name, raw in zip(names, docs, strict=True):
        if raw is None:
            continue  # deleted since HKEYS
        doc = json.loads(raw)
        configs = {str(k): str(v) for k, v in (doc.get("configs") or {}).items()}
        rows.append(
            TopicRow(name, int(doc["partitions"]), str(doc.get("format", "record")), None, configs)
        )
    wanted = []
    for row in rows:
        if len(wanted) + row.partitions > MAX_PARTITIONS_SHOWN:
            break
        wanted += [(row, p) for p in range(row.partitions)]
    if wanted:
        async with redis.pipeline(transaction=False) as pipe:
            for row, p in wanted:
                pipe.hmget(keys.partition_keys(row.name, p)[1], "hw", "lso")
            replies = await pipe.execute()
        for (row, _), (hw, lso) in zip(wanted, replies, strict=True):
            row.records = (row.records or 0) + max(int(hw or 0) - int(lso or 0), 0)
    return rows


async def watermarks(redis: Any, topic: str, partitions: int) -> list[tuple[int, int]]:
    """(log start offset, high watermark) per partition: one pipeline."""
    async with redis.pipeline(transaction=False) as pipe:
        for p in range(partitions):
            pipe.hmget(keys.partition_keys(topic, p)[1], "hw", "lso")
        replies = await pipe.execute()
    return [(int(lso or 0), int(hw or 0)) for hw, lso in replies]


async def records(store: Any, topic: str, partition: int, start: int, end: int) -> list[Record]:
    """At most PAGE_RECORDS records from offset `start` (before `end`), either format."""
    out: list[Record] = []
    async for entries in store.record_chunks(topic, partition, start, end):
        for entry_id, f in entries:
            offset = int(entry_id[2:]) - 1
            if offset < start:
                continue
            flags = int(f[F])
            out.append(
                Record(
                    offset,
                    int(f[T]),
                    None if flags & FLAG_KEY_NULL else bytes(f[K]),
                    None if flags & FLAG_VALUE_NULL else bytes(f[V]),
                    decode_headers(f[H]) if f[H] else [],
                )
            )
            if len(out) >= PAGE_RECORDS:
                return out
    return out


async def group_ids(redis: Any) -> list[str]:
    return sorted(m.decode(errors="surrogateescape") for m in await redis.smembers(keys.GROUPS))


@dataclass(slots=True)
class LagRow:
    topic: str
    partition: int
    committed: int
    log_end: int

    @property
    def lag(self) -> int:
        return max(self.log_end - self.committed, 0)


async def group_lag(redis: Any, group: str) -> list[LagRow]:
    """A consumer group's committed offsets and the lag behind each partition's high
    watermark: HGETALL of its offsets, then one pipeline of watermarks."""
    raw = await redis.hgetall(keys.group_keys(group)[2])
    committed = {split_field(f): CommittedOffset.decode(v).offset for f, v in raw.items()}
    parts = sorted(committed)
    if not parts:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for topic, p in parts:
            pipe.hget(keys.partition_keys(topic, p)[1], "hw")
        ends = await pipe.execute()
    return [
        LagRow(t, p, committed[(t, p)], int(hw or 0))
        for (t, p), hw in zip(parts, ends, strict=True)
    ]


@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: str  # topic(0,1) other(2), as kafka-consumer-groups prints it


@dataclass(slots=True)
class GroupState:
    state: str
    generation: int
    protocol: str
    members: list[Member]


async def group_state(redis: Any, group: str) -> GroupState | None:
    """The group as its coordinator last stored it (when a generation completed or the
    group emptied): one GET. None: nothing stored (offsets only)."""
    raw = await redis.get(keys.group_keys(group)[1])
    if raw is None:
        return None
    doc = json.loads(raw)
    members = []
    for m in doc.get("members", []):
        try:
            assigned = decode_assignment(base64.b64decode(m.get("assignment", "")))
        except ValueError:
            assigned = None
        by_topic: dict[str, list[int]] = {}
        for tp in assigned or []:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        text = " ".join(f"{t}({','.join(map(str, ps))})" for t, ps in sorted(by_topic.items()))
        members.append(
            Member(str(m.get("id")), str(m.get("client")), str(m.get("host")), text or "-")
        )
    return GroupState(
        str(doc.get("state", "?")),
        int(doc.get("generation", -1)),
        str(doc.get("protocol") or "-"),
        members,
    )


def show_bytes(data: bytes | None, mode: str) -> str:
    """A key or value as text, pretty JSON or hex (the page escapes it)."""
    if data is None:
        return "null"
    if mode == "hex":
        return data.hex(" ")
    text = data.decode("utf-8", errors="replace")
    if mode == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to show
            return text
    return text
