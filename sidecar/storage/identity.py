"""The storage identity: what tells a sidecar that the Redis behind its URL still holds
the data it has been serving.

Redis can lose everything at once (a restart without persistence, FLUSHALL, another
Redis behind the same URL). The topic registry, the partitions' watermarks, committed
offsets and producer state then vanish together, and a sidecar that auto-created the
topics again would hand out offsets from 0 that clients already hold for other records.

`skiff:identity` (keys.IDENTITY) holds a JSON document created once:

    {"cluster_id": "...", "created_ms": ..., "previous": [...], "lost": null | {...}}

Each sidecar remembers the cluster id it established at start-up and re-reads the
document every CHECK_INTERVAL_S (and at once when an append or a topic creation looks
suspicious). It is *lost* when the document

- is gone while this sidecar had seen it (the data went with it),
- names another cluster id that no operator reset led to,
- or carries a `lost` marker (another sidecar noticed first).

A sidecar that notices a loss writes the `lost` marker into Redis (compare-and-set,
lua/identity_cas.lua), so every sidecar sharing the Redis, and any started later,
refuses too until the operator decides with `skiff storage reset --fresh` (a new
cluster id; `previous` lists the ones it replaced, which sidecars take as the signal to
serve again). While lost a sidecar answers every request that needs Redis with
retriable errors (server.py, apis/unavailable.py) and creates no topic.

Each partition's meta hash carries the cluster id it was created under (`sid`), and
lua/append.lua refuses, atomically with the append, a partition created under another
identity. A sidecar starting against a Redis with Skiff data but no identity (an
upgrade from a version without one) adopts it, keeping `skiff:cluster_id`."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from sidecar.storage import keys, resilience, scripts
from sidecar.storage.resilience import RedisUnavailable

log = logging.getLogger("skiff.storage")

CHECK_INTERVAL_S = 0.5
LOUD_EVERY_S = 30.0  # while lost, the loud line repeats this often, not per request
PREVIOUS_KEPT = 32
LOST_REASON = "storage lost"
DECIDE = (
    "Run `skiff storage status` to see what happened and `skiff storage reset --fresh` "
    "to start fresh (new cluster id and topic ids); until then every partition and group "
    "is refused with retriable errors"
)


class StorageLost(RedisUnavailable):
    """This sidecar's storage identity is lost: answered with retriable errors."""

    def __init__(self, detail: str) -> None:
        super().__init__(LOST_REASON, False, detail)


@dataclass(slots=True)
class IdentityDoc:
    cluster_id: str
    created_ms: int
    previous: list[str] = field(default_factory=list)
    lost: dict[str, Any] | None = None

    def dumps(self) -> str:
        return json.dumps(
            {
                "cluster_id": self.cluster_id,
                "created_ms": self.created_ms,
                "previous": self.previous,
                "lost": self.lost,
            },
            sort_keys=True,
        )


def parse(raw: bytes | None) -> IdentityDoc | None:
    if raw is None:
        return None
    doc = json.loads(raw)
    return IdentityDoc(
        str(doc["cluster_id"]),
        int(doc.get("created_ms", 0)),
        [str(p) for p in doc.get("previous") or []],
        doc.get("lost") or None,
    )


def new_cluster_id() -> str:
    # Kafka cluster ids are 16 random bytes in URL-safe base64 without padding.
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def now_ms() -> int:
    return int(time.time() * 1000)


def lost_marker(reason: str, cluster_id: str | None) -> dict[str, Any]:
    return {"since_ms": now_ms(), "reason": reason, "ids": [cluster_id] if cluster_id else []}


async def read(redis: Redis) -> tuple[bytes, IdentityDoc | None]:
    """(the raw value, '' when missing, for a compare-and-set; the parsed document)."""
    raw = await redis.get(keys.IDENTITY)
    return (raw or b""), parse(raw)


async def swap(redis: Redis, old: bytes, new: IdentityDoc) -> bool:
    return bool(await scripts.IDENTITY_CAS(redis, [keys.IDENTITY], [old, new.dumps()]))


class StorageIdentity:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.cluster_id: str | None = None  # the identity this sidecar serves under
        self.lost: str | None = None  # why, while the storage is lost
        self.lost_since_ms = 0
        self._loud_at = float("-inf")
        self._listeners: list[Callable[[str], None]] = []
        self._poke = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.refused = 0  # requests refused while lost (the metric reads it)

    def on_reset(self, listener: Callable[[str], None]) -> None:
        """listener(new cluster id): called when an operator reset is adopted."""
        self._listeners.append(listener)

    # -- start-up --------------------------------------------------------------

    async def establish(self) -> None:
        """Read the identity, creating it on a fresh Redis or adopting a Redis that has
        Skiff data from a version without one. A lost identity is not an error here:
        the sidecar starts and refuses until the operator decides."""
        for _ in range(20):
            raw, doc = await read(self.redis)
            if doc is None:
                doc = await self._create()
                if doc is None:
                    continue  # another sidecar created it meanwhile: read again
            if doc.lost:
                self._enter_lost(doc.lost)
            else:
                self.cluster_id = doc.cluster_id
                await self.redis.set(keys.CLUSTER_ID, doc.cluster_id)
            return
        raise RuntimeError("the storage identity kept changing during start-up")

    async def _create(self) -> IdentityDoc | None:
        existing = await self.redis.get(keys.CLUSTER_ID)
        has_data = existing is not None or bool(await self.redis.exists(keys.TOPICS))
        doc = IdentityDoc(existing.decode() if existing else new_cluster_id(), now_ms())
        if not await swap(self.redis, b"", doc):
            return None
        if has_data:
            log.info(
                "adopted the Skiff data in Redis (written by a version without a storage "
                "identity) under cluster id %s",
                doc.cluster_id,
            )
        else:
            log.info("new storage identity: cluster id %s", doc.cluster_id)
        return doc

    # -- watching ----------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="storage-identity")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def poke(self) -> None:
        """Check now (an append found its partition gone or under another identity)."""
        self._poke.set()

    async def _watch(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._poke.wait(), CHECK_INTERVAL_S)
            self._poke.clear()
            try:
                # The default retry time: a short one would time out on a Redis that is
                # only slow (loading its AOF), and log an outage of its own.
                await self.check()
            except Exception as exc:  # Redis down: the request path reports that itself
                if resilience.classify(exc) is None:
                    log.exception("storage identity check failed")
            if self.lost is not None:
                self._loud()

    async def check(self) -> None:
        """Compare the identity in Redis with the one this sidecar serves under, and
        record a loss in Redis when this sidecar is the first to notice it."""
        for _ in range(20):
            raw, doc = await read(self.redis)
            mine = self.cluster_id
            if doc is None:
                # Gone: Redis lost its data (or this is another Redis). Without a memory
                # of it (started while lost, then flushed again) it is still lost.
                reason = (
                    f"the storage identity (cluster id {mine}) is gone from Redis: Redis "
                    "restarted without its data, was flushed, or another Redis answers "
                    "at this URL"
                    if mine
                    else "the storage identity is gone from Redis again while lost"
                )
                lost = IdentityDoc(
                    mine or new_cluster_id(), now_ms(), lost=lost_marker(reason, mine)
                )
                if await swap(self.redis, raw, lost):
                    self._enter_lost(lost.lost or {})
                    return
                continue
            if doc.lost:
                if mine and mine not in doc.lost.get("ids", []):
                    doc.lost["ids"] = [*doc.lost.get("ids", []), mine]
                    if not await swap(self.redis, raw, doc):
                        continue
                self._enter_lost(doc.lost)
                return
            if doc.cluster_id == mine and self.lost is None:
                return
            if self.lost is not None or mine is None or mine in doc.previous:
                self._adopt(doc)  # only an operator reset clears a lost marker
                return
            reason = (
                f"the storage identity changed from cluster id {mine} to {doc.cluster_id} "
                "without an operator reset: another Redis answers at this URL, or Redis "
                "lost its data and a sidecar started on it afresh"
            )
            doc.lost = lost_marker(reason, mine)
            if await swap(self.redis, raw, doc):
                self._enter_lost(doc.lost)
                return
        raise RuntimeError("the storage identity kept changing")

    def _enter_lost(self, marker: dict[str, Any]) -> None:
        first = self.lost is None
        self.lost = str(marker.get("reason") or "storage lost")
        self.lost_since_ms = int(marker.get("since_ms") or now_ms())
        if first:
            self._loud_at = float("-inf")
            self._loud()

    def _loud(self) -> None:
        now = time.monotonic()
        if now - self._loud_at >= LOUD_EVERY_S:
            self._loud_at = now
            log.error("STORAGE LOST: %s. %s (%d refused so far).", self.lost, DECIDE, self.refused)

    def _adopt(self, doc: IdentityDoc) -> None:
        old, self.cluster_id = self.cluster_id, doc.cluster_id
        was_lost, self.lost = self.lost, None
        log.warning(
            "storage reset by the operator: cluster id %s -> %s; serving again%s",
            old,
            doc.cluster_id,
            " (was lost: " + was_lost + ")" if was_lost else "",
        )
        for listener in self._listeners:
            listener(doc.cluster_id)

    # -- the request path -----------------------------------------------------------

    def ensure_serving(self) -> None:
        if self.lost is not None:
            raise StorageLost(self.lost)

    async def verify(self) -> None:
        """Read the identity now and raise StorageLost unless it is intact: topic
        creation runs this before and after writing, so a topic is never re-created in
        a Redis that lost the data this sidecar served."""
        await self.check()
        self.ensure_serving()
