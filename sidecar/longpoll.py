"""Wake-ups for long-polling fetches.

The append script PUBLISHes once per batch on the partition's channel; one pattern
subscription per sidecar turns that into asyncio events, so a waiting Fetch returns
as soon as data arrives and no sidecar polls Redis in a loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from redis.asyncio import Redis

from .storage import keys

log = logging.getLogger(__name__)


class Wakeups:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self._waiters: dict[bytes, set[asyncio.Event]] = defaultdict(set)
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name="skiff-wakeups")
        await asyncio.wait_for(self._subscribed.wait(), timeout=10)

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

    async def _listen(self) -> None:
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(keys.WAKE_PATTERN)
                self._subscribed.set()
                while True:
                    message = await pubsub.get_message(timeout=None)
                    if message is None:
                        continue
                    for event in self._waiters.get(message["channel"], ()):
                        event.set()
            except asyncio.CancelledError:
                await pubsub.aclose()
                raise
            except Exception as exc:  # connection lost: wake everyone, resubscribe
                log.warning("wake-up subscription lost (%s); resubscribing", exc)
                for waiters in self._waiters.values():
                    for event in waiters:
                        event.set()
                await pubsub.aclose()
                await asyncio.sleep(0.5)
