"""Wake-ups for long-polling fetches.

The append script PUBLISHes once per batch on the partition's channel; one pattern
subscription per sidecar turns that into asyncio events, so a waiting Fetch returns
as soon as data arrives and no sidecar polls Redis in a loop. On a Redis Cluster the
publish (classic, not sharded) reaches every node, and the subscription is on any one
node (storage/cluster_client.py ResilientCluster.pubsub picks the next after a loss).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from sidecar.storage import keys

log = logging.getLogger(__name__)


class Wakeups:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._waiters: dict[bytes, set[asyncio.Event]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        # Shutting down: long polls answer at once with what they have.
        self.closing = False

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="skiff-wakeups")
        await asyncio.wait_for(self._subscribed.wait(), timeout=10)

    def shutdown(self) -> None:
        """Answer every waiting long poll now, and let no new one wait."""
        self.closing = True
        self._wake_all()

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def waiting(self) -> int:
        """Long polls waiting now (for /metrics)."""
        return len(set().union(*self._waiters.values())) if self._waiters else 0

    def register(self, channels: list[str]) -> asyncio.Event:
        event = asyncio.Event()
        for channel in channels:
            self._waiters[channel.encode()].add(event)
        return event

    def unregister(self, event: asyncio.Event, channels: list[str]) -> None:
        for channel in channels:
            key = channel.encode()
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[key]

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    def _stale(self, pubsub: PubSub) -> bool:
        """Subscribed to a Redis that is no longer the Sentinel-managed primary (its
        publishes would still reach us through replication, until it is cut off)."""
        pool = getattr(self._redis, "connection_pool", None)  # none on a Redis Cluster
        master = getattr(pool, "master_address", None)
        conn = pubsub.connection
        return master is not None and conn is not None and (conn.host, conn.port) != master

    async def _listen(self) -> None:
        lost_at: float | None = None
        loop = asyncio.get_running_loop()
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(keys.WAKE_PATTERN)
                self._subscribed.set()
                if lost_at is not None:
                    log.warning("wake-up subscription restored after %.1f s", loop.time() - lost_at)
                    lost_at = None
                    # Appends may have happened meanwhile: let waiting fetches re-read.
                    self._wake_all()
                while True:
                    # A bounded wait, so a Sentinel failover is noticed within a second.
                    message = await pubsub.get_message(timeout=1.0)
                    if message is None:
                        if self._stale(pubsub):
                            raise ConnectionError("the Redis primary changed")
                        continue
                    for event in self._waiters.get(message["channel"], ()):
                        event.set()
            except asyncio.CancelledError:
                await _close(pubsub)
                raise
            except Exception as exc:  # connection lost: wake everyone, resubscribe
                if lost_at is None:
                    lost_at = loop.time()
                    log.warning("wake-up subscription lost (%s); resubscribing", exc)
                self._wake_all()
                await _close(pubsub)
                await asyncio.sleep(0.5)


async def _close(pubsub: PubSub) -> None:
    try:
        await asyncio.wait_for(pubsub.aclose(), 2.0)
    except Exception:  # the connection is dead already
        pass
