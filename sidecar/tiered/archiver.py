"""The archiver: for each partition of a topic with remote.storage.enable that this
sidecar leads, under the partition's cleaner lease (one archiver at a time; remote
storage requires cleanup.policy=delete, so no compactor competes for it):

1. Local retention: the batches that local.retention.bytes / local.retention.ms (-2:
   retention.bytes / retention.ms) no longer keep in Redis, below the last stable
   offset, are read from the stream a segment at a time (at most segment.bytes and
   SEGMENT_BYTES; a larger batch goes alone), written
   to the object store as one immutable object (segments.py) under a fresh name, and
   then recorded in the segment list and trimmed from Redis in one script
   (lua/archive.lua `record`). A crash between the upload and the script leaves an
   unrecorded object, which no reader sees and the garbage pass deletes; a recorded
   segment's range is never in Redis too.
2. Whole-log retention: segments below the log start (DeleteRecords, or Redis-side
   retention that moved it past them) and segments that retention.ms / retention.bytes
   no longer keep leave the list, moving the log start (`drop`), before their objects
   are deleted.

With --remote-parquet, each segment is also written as a Parquet file beside it
(parquet.py), deleted with it; a copy whose upload failed is written by the next
garbage pass.

Every so often one sidecar (under `skiff:remote_gc`) deletes what no segment list
names: objects of deleted topics (a topic's objects are under its topic id) and
unrecorded uploads older than GC_AGE_MS, and writes missing Parquet copies."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from sidecar.cluster import Cluster
from sidecar.config import topic as topic_config
from sidecar.maintenance.background import BackgroundLoop
from sidecar.storage import keys, scripts
from sidecar.storage.store import RedisStore, TopicInfo
from sidecar.telemetry.logs import RateLimitedLog
from sidecar.tiered import parquet, segments
from sidecar.tiered.object_store import ObjectStoreError
from sidecar.tiered.remote_log import RemoteLog
from sidecar.tiered.segments import Segment

log = logging.getLogger(__name__)

SEGMENT_BYTES = 8 * 1024 * 1024  # at most, per segment object (a batch above goes alone)
# The lease only keeps sidecars from uploading the same range twice; what makes a range
# recorded once is archive.lua's check of the local log start. So it is short: a
# SIGKILLed holder delays archiving by this much.
LEASE_MS = 10_000
SEGMENTS_PER_PASS = 64  # per partition, then the next partition gets its turn
GC_INTERVAL_S = 300.0
GC_AGE_MS = 600_000  # an unrecorded object younger than this may be an upload in flight
GC_LEASE = "skiff:remote_gc"


def remote_enabled(info: TopicInfo) -> bool:
    return bool(info.config.get("remote.storage.enable")) and info.batch_format


class Archiver(BackgroundLoop):
    def __init__(
        self,
        store: RedisStore,
        cluster: Cluster,
        remote: RemoteLog,
        interval_ms: int,
        segment_bytes: int = SEGMENT_BYTES,
        parquet_files: bool = False,
    ) -> None:
        super().__init__()
        self.store = store
        self.cluster = cluster
        self.remote = remote
        self.interval = interval_ms / 1000
        self.segment_bytes = segment_bytes
        self.parquet_files = parquet_files
        self.token = secrets.token_hex(8)
        self._last_gc = float("-inf")  # the first pass collects garbage
        self._warn = RateLimitedLog(log, 10.0)

    async def _run(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep()
                if time.monotonic() - self._last_gc > GC_INTERVAL_S:
                    self._last_gc = time.monotonic()
                    await self.collect_garbage()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis or the object store away: next interval
                self._warn.warning("archiver pass failed: %s", exc)

    async def sweep(self) -> int:
        """One pass over the remote-storage partitions this sidecar leads; returns the
        segments archived."""
        archived = 0
        # Fresh configs: a topic whose remote storage was just turned off is never
        # archived again (the cache lags a change by up to a wake-up).
        for info in await self.store.list_topics(fresh=True):
            disabled = info.batch_format and not remote_enabled(info)
            if disabled and not info.config.get("remote.log.delete.on.disable"):
                continue  # off: what was archived stays readable (KIP-950)
            if not info.batch_format:
                continue
            for p in range(info.partitions):
                if self._stopping:
                    return archived
                if self.cluster.leader(info.name, p, info.partitions) != self.cluster.node_id:
                    continue
                if disabled:
                    await self._delete_all(info, p)
                else:
                    archived += await self.partition(info, p)
        return archived

    async def _delete_all(self, info: TopicInfo, partition: int) -> None:
        """remote.storage.enable turned off with remote.log.delete.on.disable: every
        archived segment goes, the log start moving past it (KIP-950)."""
        if not await self.store.redis.zcard(keys.remote_key(info.name, partition)):
            return
        name = info.name
        if not await self.store.cleaner_lease(name, partition, "acquire", self.token, LEASE_MS):
            return
        try:
            for segment in await self.remote.segment_list(name, partition):
                if not await self._drop(info, partition, segment):
                    return
        finally:
            await self.store.cleaner_lease(name, partition, "release", self.token, LEASE_MS)

    async def partition(self, info: TopicInfo, partition: int) -> int:
        name = info.name
        if not await self.store.cleaner_lease(name, partition, "acquire", self.token, LEASE_MS):
            return 0
        archived = 0
        try:
            await self._drop_expired(info, partition)
            if info.config.get("remote.log.copy.disable"):
                return 0
            while archived < SEGMENTS_PER_PASS and not self._stopping:
                if not await self._archive_one(info, partition):
                    break
                archived += 1
                if not await self.store.cleaner_lease(
                    name, partition, "renew", self.token, LEASE_MS
                ):
                    break
        except ObjectStoreError as exc:
            self._warn.warning("archiver %s-%d: %s", name, partition, exc)
        finally:
            await self.store.cleaner_lease(name, partition, "release", self.token, LEASE_MS)
        return archived

    # -- local retention: Redis -> object store --------------------------------------

    async def _target(self, info: TopicInfo, partition: int, meta: list[Any]) -> int:
        """The first offset local retention keeps in Redis (a batch's base offset)."""
        hw = int(meta[0])
        appended, cleaned = meta[4], meta[5]
        config = info.config
        local_bytes = config["local.retention.bytes"]
        if local_bytes == -2:
            local_bytes = config["retention.bytes"]
        local_ms = config["local.retention.ms"]
        if local_ms == -2:
            local_ms = config["retention.ms"]
        _, _, time_key, _ = keys.partition_keys(info.name, partition)
        bytes_key = keys.bytes_key(info.name, partition)
        target = 0
        if local_bytes == 0:
            target = hw
        elif local_bytes > 0:
            limit = int(appended or 0) - local_bytes - int(cleaned or 0)
            hit = await self.store.redis.zrevrangebyscore(bytes_key, limit, "-inf", start=0, num=1)
            if hit:
                target = int(hit[0])
        if local_ms >= 0:
            cutoff = int(time.time() * 1000) - local_ms
            hit = await self.store.redis.zrangebyscore(time_key, cutoff, "+inf", start=0, num=1)
            if hit:
                target = max(target, int(hit[0]))
            elif await self.store.redis.zcard(time_key):
                target = hw
        return target

    async def _archive_one(self, info: TopicInfo, partition: int) -> bool:
        """Archive one segment's worth; False when local retention keeps the rest."""
        name = info.name
        log_key, meta_key, _, _ = keys.partition_keys(name, partition)
        meta = await self.store.redis.hmget(meta_key, "hw", "lso", "llso", "ls", "bytes", "cbytes")
        if meta[0] is None:
            return False
        hw, lso = int(meta[0]), int(meta[1])
        start = max(int(meta[2] or 0), lso)
        stop = min(await self._target(info, partition, meta), int(meta[3] or hw), hw)
        if stop <= start:
            return False
        # A segment object is at most segment.bytes (Kafka's segment size), and at most
        # SEGMENT_BYTES: the archiver holds one in memory.
        most = min(self.segment_bytes, topic_config.segment_bytes(info.config))
        entries: list[Any] = []
        size = 0
        position = start
        while size < most:
            chunk = await self.store.redis.xrange(log_key, f"0-{position + 1}", "+", count=32)
            if not chunk:
                break
            for entry in chunk:
                end = int(entry[0][2:])  # last offset + 1
                if end > stop or (entries and size + len(entry[1][1]) > most):
                    size = most  # done
                    break
                entries.append(entry)
                size += len(entry[1][1])
                position = end
            else:
                continue
            break
        if not entries:
            return False
        data, base, end, max_ts = segments.encode(entries)
        before = await self.store.redis.zscore(keys.bytes_key(name, partition), base)
        path = f"{info.topic_id.hex}/{partition}/{base:020d}-{end:020d}-{secrets.token_hex(4)}.log"
        segment = Segment(base, end, len(data), max_ts, int(before or 0), path)
        await self.remote.store.put(path, data)
        recorded = await scripts.ARCHIVE(
            self.store.redis,
            self._keys(name, partition),
            [
                "record",
                self.token,
                start,
                end,
                base,
                segment.member(),
                segment.bytes_before + segment.size,
                segment.size,
            ],
        )
        if recorded != 1:
            await self.remote.store.delete(path)
            return False
        log.debug("archived %s-%d [%d, %d): %d bytes", name, partition, base, end, len(data))
        if self.parquet_files:
            try:
                table = await parquet.encode(name, partition, data)
                await self.remote.store.put(parquet.path_for(path), table)
            except Exception as exc:  # the segment is archived; only its copy is missing
                self._warn.warning("Parquet copy of %s: %s", path, exc)
        return True

    def _keys(self, name: str, partition: int) -> list[str]:
        log_key, meta_key, time_key, _ = keys.partition_keys(name, partition)
        return [
            keys.cleaner_key(name, partition),
            meta_key,
            log_key,
            time_key,
            keys.bytes_key(name, partition),
            keys.remote_key(name, partition),
        ]

    # -- whole-log retention of the remote tier --------------------------------------

    async def _drop_expired(self, info: TopicInfo, partition: int) -> None:
        listed = await self.remote.segment_list(info.name, partition)
        if not listed:
            return
        meta_key = keys.partition_keys(info.name, partition)[1]
        lso, appended = await self.store.redis.hmget(meta_key, "lso", "bytes")
        if lso is None:
            return
        retention_ms = info.config["retention.ms"]
        retention_bytes = info.config["retention.bytes"]
        cutoff = int(time.time() * 1000) - retention_ms
        total = int(appended or 0) - listed[0].bytes_before
        for segment in listed:
            if segment.end <= int(lso):
                pass
            elif retention_ms >= 0 and segment.max_timestamp < cutoff:
                pass
            elif retention_bytes >= 0 and total - segment.size >= retention_bytes:
                pass
            else:
                break
            total -= segment.size
            if not await self._drop(info, partition, segment):
                return

    async def _drop(self, info: TopicInfo, partition: int, segment: Segment) -> bool:
        """A segment out of the list (the log start moving to its end), then out of the
        store; False when the lease is lost."""
        dropped = await scripts.ARCHIVE(
            self.store.redis,
            self._keys(info.name, partition),
            [
                "drop",
                self.token,
                segment.member(),
                segment.end,
                keys.wake_channel(info.name, partition),
                segment.size,
                segment.bytes_before + segment.size,
            ],
        )
        if dropped != 1:
            return False
        log.info(
            "remote storage: %s-%d segment [%d, %d) deleted",
            info.name,
            partition,
            segment.base,
            segment.end,
        )
        await self.remote.store.delete(segment.path)
        await self.remote.store.delete(parquet.path_for(segment.path))
        return True

    # -- garbage ------------------------------------------------------------------------

    async def collect_garbage(self) -> int:
        """Delete objects no segment list names (see the module's doc); returns how
        many. One sidecar at a time."""
        redis = self.store.redis
        if not await redis.set(GC_LEASE, self.token, nx=True, px=int(GC_INTERVAL_S * 1000)):
            return 0
        live = {
            k.decode() if isinstance(k, bytes) else k for k in await redis.hkeys(keys.TOPIC_IDS)
        }
        store = self.remote.store
        deleted = 0
        now = int(time.time() * 1000)
        for prefix in await store.prefixes():
            topic_id = prefix.rstrip("/").rsplit("/", 1)[-1]
            known = topic_id in live
            named: set[str] = set()
            listed_segments: list[tuple[TopicInfo, int, Segment]] = []
            if known:
                name = await redis.hget(keys.TOPIC_IDS, topic_id)
                info = await self.store.get_topic(
                    name.decode() if isinstance(name, bytes) else name
                )
                if info is None:
                    continue
                for p in range(info.partitions):
                    for segment in await self.remote.segment_list(info.name, p):
                        named.update((segment.path, parquet.path_for(segment.path)))
                        listed_segments.append((info, p, segment))
            present = await store.list(prefix)
            for path, modified in present:
                if path in named or (known and now - modified < GC_AGE_MS):
                    continue
                await store.delete(path)
                deleted += 1
            if self.parquet_files:
                await self._copy_missing_parquet(listed_segments, {p for p, _ in present})
        if deleted:
            log.info("remote storage: deleted %d objects no segment list names", deleted)
        return deleted

    async def _copy_missing_parquet(
        self, listed: list[tuple[TopicInfo, int, Segment]], present: set[str]
    ) -> None:
        """Write again the Parquet copies that a failed upload left missing: the segment
        is archived either way, and the copy is made from it. A segment dropped
        meanwhile is skipped (its object is gone: the read fails)."""
        for info, partition, segment in listed:
            path = parquet.path_for(segment.path)
            if path in present or segment.path not in present:
                continue
            try:
                data = await self.remote.store.get(segment.path)
                table = await parquet.encode(info.name, partition, data)
                await self.remote.store.put(path, table)
            except Exception as exc:  # the next pass tries again
                self._warn.warning("Parquet copy of %s: %s", segment.path, exc)
                continue
            log.info("remote storage: wrote the missing Parquet copy of %s", segment.path)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
