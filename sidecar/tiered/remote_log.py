"""The remote tier of a partition: its segment list in Redis (`skiff:{t/p}:remote`,
score = base offset, member = Segment.member()) and reads of segment objects through a
bounded cache with read-ahead of the next segment (a catch-up reader reads on)."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

from redis.asyncio import Redis

from sidecar.protocol import stored_batch
from sidecar.storage import keys
from sidecar.tiered import parquet, segments
from sidecar.tiered.object_store import ObjectStore
from sidecar.tiered.segments import Segment

log = logging.getLogger(__name__)

CACHE_BYTES = 64 * 1024 * 1024  # segment objects kept in memory, least recently used out


class RemoteReadError(Exception):
    """A segment object could not be read (store away, or corrupt): a retriable error."""


class RemoteLog:
    def __init__(self, store: ObjectStore, redis: Redis, cache_bytes: int = CACHE_BYTES) -> None:
        self.store = store
        self.redis = redis
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cached = 0
        self._loading: dict[str, asyncio.Future[bytes]] = {}
        self._ahead: set[asyncio.Task[Any]] = set()
        self._deleting: set[asyncio.Task[Any]] = set()

    async def segment_at(self, topic: str, partition: int, offset: int) -> Segment | None:
        """The segment holding `offset`, if any."""
        hit = await self.redis.zrevrangebyscore(
            keys.remote_key(topic, partition), offset, "-inf", start=0, num=1, withscores=True
        )
        if not hit:
            return None
        segment = Segment.parse(*hit[0])
        return segment if offset < segment.end else None

    async def segment_list(self, topic: str, partition: int) -> list[Segment]:
        members = await self.redis.zrange(keys.remote_key(topic, partition), 0, -1, withscores=True)
        return [Segment.parse(m, s) for m, s in members]

    async def read(self, topic: str, partition: int, offset: int, max_bytes: int) -> list[Any]:
        """Stored batch entries from the batch holding `offset` (whole batches within
        max_bytes, the first whatever its size); [] when no segment holds it."""
        segment = await self.segment_at(topic, partition, offset)
        if segment is None:
            return []
        data = await self.load(segment.path)
        self._read_ahead(topic, partition, segment.end)
        try:
            return segments.entries_from(data, offset, max_bytes)
        except segments.CorruptSegment as exc:
            self._forget(segment.path)
            raise RemoteReadError(f"{segment.path}: {exc}") from None

    async def load(self, path: str) -> bytes:
        data = self._cache.get(path)
        if data is not None:
            self._cache.move_to_end(path)
            return data
        future = self._loading.get(path)
        if future is None:
            future = asyncio.ensure_future(self._fetch(path))
            self._loading[path] = future
            future.add_done_callback(lambda _: self._loading.pop(path, None))
        try:
            return await asyncio.shield(future)
        except Exception as exc:
            raise RemoteReadError(str(exc)) from None

    async def _fetch(self, path: str) -> bytes:
        data = await self.store.get(path)
        if len(data) <= self.cache_bytes:
            self._cache[path] = data
            self._cached += len(data)
            while self._cached > self.cache_bytes:
                _, dropped = self._cache.popitem(last=False)
                self._cached -= len(dropped)
        return data

    def _forget(self, path: str) -> None:
        data = self._cache.pop(path, None)
        if data is not None:
            self._cached -= len(data)

    def _read_ahead(self, topic: str, partition: int, offset: int) -> None:
        """Load the segment after the one just read, in the background, once."""

        async def ahead() -> None:
            try:
                segment = await self.segment_at(topic, partition, offset)
                if segment is not None and segment.path not in self._cache:
                    await self.load(segment.path)
            except Exception as exc:  # a hint only: the read itself reports failures
                log.debug("read-ahead of %s-%d at %d: %s", topic, partition, offset, exc)

        if len(self._ahead) < 4:
            task = asyncio.ensure_future(ahead())
            self._ahead.add(task)
            task.add_done_callback(self._ahead.discard)

    async def offset_for_time(
        self, topic: str, partition: int, ts: int, log_start: int
    ) -> tuple[int, int] | None:
        """The first (offset, timestamp) at or after `log_start` whose timestamp is >=
        ts among the archived batches; None when every archived record is older (the
        answer is then in Redis). The first segment whose max timestamp reaches ts holds
        it: every record before that segment is older."""
        for segment in await self.segment_list(topic, partition):
            if segment.end <= log_start or segment.max_timestamp < ts:
                continue
            try:
                data = await self.load(segment.path)
                listed = segments.batches(data)
            except segments.CorruptSegment as exc:
                raise RemoteReadError(f"{segment.path}: {exc}") from None
            for pos, size, last, max_ts in listed:
                if max_ts < ts or last < log_start:
                    continue
                batch = data[pos : pos + size]
                for record in stored_batch.records(b"0-%d" % (last + 1), batch):
                    if record.offset >= log_start and record.timestamp >= ts:
                        return int(record.offset), int(record.timestamp)
        return None

    async def topic_objects(self, topic: str, partitions: int) -> list[str]:
        """The object paths of every archived segment of a topic (before deleting it)."""
        out = []
        for p in range(partitions):
            for segment in await self.segment_list(topic, p):
                out += [segment.path, parquet.path_for(segment.path)]
        return out

    def delete_later(self, paths: list[str]) -> None:
        """Delete objects in the background (a deleted topic's segments, as Kafka deletes
        them after answering); what fails here the archiver's garbage pass deletes."""

        async def delete() -> None:
            for path in paths:
                self._forget(path)
                try:
                    await self.store.delete(path)
                except Exception as exc:
                    log.warning("remote storage: %s (the garbage pass retries)", exc)
                    return

        if paths:
            task = asyncio.ensure_future(delete())
            self._deleting.add(task)
            task.add_done_callback(self._deleting.discard)
