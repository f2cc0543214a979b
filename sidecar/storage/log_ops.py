"""What RedisStore does to a partition's log beyond appends and reads: moving the log
start (DeleteRecords, retention: lua/trim.lua), byte sizes (DescribeLogDirs), and the
compactor's reads, deletes and lease (lua/cleaner.lua)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from sidecar.protocol import stored_batch
from sidecar.protocol.record_batch import is_control_entry
from sidecar.storage import keys, scripts


@dataclass(frozen=True, slots=True)
class PartitionSize:
    log_start_offset: int
    high_watermark: int
    size: int  # bytes in Redis, docs/architecture.md "Byte accounting"
    remote_size: int = 0  # bytes in the object store (tiered storage)


class PartitionLogOps:
    """Log start, trimming, byte sizes and compaction reads of RedisStore."""

    redis: Redis
    # Tiered storage's remote tier (sidecar/tiered/remote_log.py), set at start-up.
    remote: Any = None
    TRIM_XTRIM_LIMIT = 10_000  # entries per XTRIM (whole 100-entry stream nodes)
    TRIM_INDEX_LIMIT = 1_000  # index members pruned per call

    async def trim(
        self,
        topic: str,
        partition: int,
        offset: int | None = None,
        retention_ms: int = -1,
        retention_bytes: int = -1,
    ) -> tuple[int, int]:
        """Move the log start forward (lua/trim.lua): to `offset` (-1: the high
        watermark) for DeleteRecords, else as retention.ms / retention.bytes say. Each
        call does bounded work; loop until nothing is left. Returns (lso, hw); raises
        StoreError UNKNOWN_TOPIC_OR_PARTITION or OFFSET_OUT_OF_RANGE."""
        args: list[Any] = [
            "offset" if offset is not None else "retention",
            offset if offset is not None else 0,
            retention_ms,
            retention_bytes,
            self.TRIM_XTRIM_LIMIT,
            self.TRIM_INDEX_LIMIT,
            keys.wake_channel(topic, partition),
        ]
        script_keys = keys.trim_keys(topic, partition)
        while True:
            try:
                lso, hw, more = await scripts.TRIM(self.redis, script_keys, args)
            except ResponseError as exc:
                from sidecar.storage.store import StoreError  # store.py imports this module

                raise StoreError(str(exc).split(" ", 1)[0], str(exc)) from None
            if not more:
                return int(lso), int(hw)
            args[0] = "retention"  # the target is set: later calls only free memory
            args[2] = args[3] = -1

    async def partition_sizes(self, topic: str, partitions: list[int]) -> list[PartitionSize]:
        """Watermarks and byte sizes of each partition (missing ones are left out): the
        bytes appended since the batch holding the log start (`bytes` - `lsob`), less
        what compaction removed (`cbytes`); with tiered storage, of that what is in
        Redis (from the local log start: `llsob`) and what is in the object store
        (`rbytes`)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for p in partitions:
                meta = keys.partition_keys(topic, p)[1]
                pipe.hmget(meta, "hw", "lso", "bytes", "lsob", "cbytes", "llsob", "rbytes")
            replies = await pipe.execute()
        out = []
        for hw, lso, total, before, removed, local_before, remote in replies:
            if hw is None:
                continue
            before = max(int(before or 0), int(local_before or 0))
            size = int(total or 0) - before - int(removed or 0)
            out.append(
                PartitionSize(int(lso), int(hw), 0 if hw == lso else max(size, 0), int(remote or 0))
            )
        return out

    async def max_timestamp(self, topic: str, partition: int) -> tuple[int, int]:
        """ListOffsets' max timestamp: (offset, timestamp) of the record with the largest
        timestamp, or (-1, -1). As in Kafka, DeleteRecords does not remove it (Kafka's
        segment stays); when retention removed it (as Kafka deletes segments), the
        largest of the records left, found by a chunked scan (rare: records arrived
        with timestamps below an earlier one)."""
        hw, lso, maxts, maxtsoff, rlso = await self.meta(
            topic, partition, "hw", "lso", "maxts", "maxtsoff", "rlso"
        )
        if hw is None:
            from sidecar.storage.store import StoreError  # store.py imports this module

            raise StoreError("UNKNOWN_TOPIC_OR_PARTITION")
        if maxts is None or maxtsoff is None or maxts < 0:
            return -1, -1
        if maxtsoff >= (rlso or 0):
            return maxtsoff, maxts
        best = (-1, -1)
        async for entries in self.record_chunks(topic, partition, lso or 0, hw):
            for entry_id, f in entries:
                t = int(f[1])
                if t > best[1]:
                    best = (int(entry_id[2:]) - 1, t)
        return best

    async def record_chunks(
        self, topic: str, partition: int, start: int, end: int
    ) -> AsyncIterator[list[Any]]:
        """The records from offset `start` to `end` (exclusive, or the log's end) as
        `record`-format entries (raw XRANGE shape), a chunk at a time, whatever the
        topic's storage format: a `batch` topic's batches are expanded
        (protocol/stored_batch.py)."""
        info = await self.get_topic(topic)  # type: ignore[attr-defined]
        batches = info is not None and info.batch_format
        pos = start
        while pos < end:
            entries = await self.read_entries(topic, partition, pos, 50 if batches else 1000)
            if not entries:
                return
            after = int(entries[-1][0][2:])  # one past the last offset read, either format
            if batches:
                entries = stored_batch.record_entries(entries, pos)
            else:  # markers are no records (record_entries leaves them out too)
                entries = [e for e in entries if not is_control_entry(e[1])]
            yield [e for e in entries if int(e[0][2:]) <= end]
            if after <= pos:
                return
            pos = after

    async def read_entries(self, topic: str, partition: int, start: int, count: int) -> list[Any]:
        """Raw stream entries from offset `start` on (no watermark checks); below the
        local log start of a tiered topic, archived batches from the object store."""
        log_key, meta_key = keys.partition_keys(topic, partition)[:2]
        if self.remote is not None:
            local_start = await self.redis.hget(meta_key, "llso")
            if local_start is not None and start < int(local_start):
                entries = await self.remote.read(topic, partition, start, 8 << 20)
                if entries:
                    return entries[:count]
        return list(await self.redis.xrange(log_key, f"0-{start + 1}", "+", count=count))

    async def delete_entries(self, topic: str, partition: int, offsets: list[int]) -> int:
        """XDEL the records at `offsets` (compaction); the caller bounds the count."""
        log_key = keys.partition_keys(topic, partition)[0]
        return int(await self.redis.xdel(log_key, *(f"0-{o + 1}" for o in offsets)))

    async def forget_aborted(self, topic: str, partition: int, members: list[str]) -> None:
        """Drop entries ("pid first") from the aborted-transaction index: compaction
        removes their ABORT markers, their records being gone already."""
        if members:
            await self.redis.zrem(keys.aborted_key(topic, partition), *members)

    async def meta(self, topic: str, partition: int, *names: str) -> list[int | None]:
        values = await self.redis.hmget(keys.partition_keys(topic, partition)[1], *names)
        return [None if v is None else int(v) for v in values]

    async def first_offset_at_or_after(self, topic: str, partition: int, ts: int) -> int | None:
        """The base offset of the first time-index batch whose running max timestamp is
        > ts (None: none), for min.compaction.lag.ms."""
        time_key = keys.partition_keys(topic, partition)[2]
        hits = await self.redis.zrangebyscore(time_key, f"({ts}", "+inf", start=0, num=1)
        return int(hits[0]) if hits else None

    async def byte_scores(self, topic: str, partition: int, offset: int) -> tuple[int, int | None]:
        """(bytes appended before the batch holding the log start, bytes appended before
        the batch at `offset` or None when no batch starts there)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hget(keys.partition_keys(topic, partition)[1], "lsob")
            pipe.zscore(keys.bytes_key(topic, partition), offset)
            before, at = await pipe.execute()
        return int(before or 0), (None if at is None else int(at))

    async def cleaner_lease(
        self, topic: str, partition: int, op: str, token: str, lease_ms: int, *done: Any
    ) -> bool:
        """The compaction lease (lua/cleaner.lua): acquire, renew, release, or done with
        the cleaned-up-to offset and meta fields to set."""
        return bool(
            await scripts.CLEANER(
                self.redis,
                [keys.cleaner_key(topic, partition), keys.partition_keys(topic, partition)[1]],
                [op, token, lease_ms, *done],
            )
        )

    def _clean_keys(self, topic: str, partition: int) -> list[str]:
        log_key, meta = keys.partition_keys(topic, partition)[:2]
        return [
            keys.cleaner_key(topic, partition),
            meta,
            log_key,
            keys.cleaned_log_key(topic, partition),
        ]

    async def clean_write(
        self, topic: str, partition: int, token: str, lease_ms: int, *pairs: Any
    ) -> bool:
        """Append (entry ID, batch) pairs to the cleaned log of a `batch` topic
        (lua/cleaner.lua `write`; a first pair '' starts it afresh); False when the lease
        is lost or the partition gone."""
        return bool(
            await scripts.CLEANER(
                self.redis, self._clean_keys(topic, partition), ["write", token, lease_ms, *pairs]
            )
        )

    async def clean_swap(
        self,
        topic: str,
        partition: int,
        token: str,
        lease_ms: int,
        after: bytes,
        most: int,
        *done: Any,
    ) -> int:
        """Replace the log of a `batch` topic by its cleaned log, copying what was
        appended after entry `after` (lua/cleaner.lua `swap`): 1 done, 0 lease lost or
        partition gone, -1 more than `most` entries to copy, -2 the log has consumer
        groups."""
        return int(
            await scripts.CLEANER(
                self.redis,
                self._clean_keys(topic, partition),
                ["swap", token, lease_ms, after, most, *done],
            )
        )
