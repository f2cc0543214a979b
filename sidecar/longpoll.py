"""Wake-ups for long-polling fetches.

The append script PUBLISHes once per batch on the partition's channel; one pattern
subscription per sidecar turns that into asyncio events, so a waiting Fetch returns
as soon as data arrives and no sidecar polls Redis in a loop. On a Redis Cluster the
publish (classic, not sharded) reaches every node, and the subscription is on any one
node (storage/cluster_client.py ResilientCluster.pubsub picks the next after a loss).

Every change of a partition's high watermark or log start offset publishes "hw lso" on
its channel (lua/append.lua, lua/trim.lua), and deleting or creating a topic publishes
"gone". So while the subscription is known to be live, the last values seen for a
partition (from those messages and from Fetch's reads) are its current ones:
WatermarkCache lets a long poll at the end of the log wait without reading Redis.

Every write of the topic registry publishes the topic's name on keys.TOPICS_CHANNEL
(under the same pattern), so the store's registry cache stays valid while the
subscription is live (RedisStore.topic_changed): idle long polls then read nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable

from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from sidecar.storage import keys

log = logging.getLogger(__name__)

TOPICS_CHANNEL = keys.TOPICS_CHANNEL.encode()

PING = b"skiff-wakeups"  # the subscription's own PING payload (its PONG proves it live)
LIVE_S = 3.0  # the cache answers only while a message or PONG came this recently
DEAD_S = 10.0  # no message nor PONG for this long: the subscription is lost


class WatermarkCache:
    """(high watermark, log start offset, last stable offset) per wake-up channel, as
    last published or read.

    Valid only while the subscription is live: on a loss everything is forgotten and
    nothing is answered until a PONG shows the new subscription in place. A read's
    values are kept only if no message for its partition (nor a loss) came while it
    was in flight: the message may be newer than the read, or say the topic is gone."""

    def __init__(self) -> None:
        self._entries: dict[bytes, tuple[int, int, int]] = {}
        # channel -> [reads in flight, changes seen]: a read keeps its values only if
        # the count of changes is what it was when the read began.
        self._reads: dict[bytes, list[int]] = {}
        self._live_at = float("-inf")
        self.enabled = True  # off on a Redis Cluster (see Wakeups)
        self.epoch = 0  # one more per loss: what was kept before one is not current

    def live(self) -> bool:
        return self.enabled and time.monotonic() - self._live_at < LIVE_S

    def alive(self) -> None:
        self._live_at = time.monotonic()

    def get(self, channel: bytes) -> tuple[int, int, int] | None:
        return self._entries.get(channel) if self.live() else None

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget everything (subscription lost, storage reset)."""
        self._entries.clear()
        for state in self._reads.values():
            state[1] += 1

    def lost(self) -> None:
        self._live_at = float("-inf")
        self.epoch += 1
        self.clear()

    def published(self, channel: bytes, data: bytes) -> None:
        state = self._reads.get(channel)
        if state is not None:
            state[1] += 1
        if channel not in self._entries:
            return  # only partitions read through this sidecar are kept
        # "hw lso", or "hw lso ls" while a transaction is open on the partition
        parts = data.split()
        if 2 <= len(parts) <= 3 and all(p.isdigit() for p in parts):
            hw = int(parts[0])
            self._entries[channel] = (hw, int(parts[1]), int(parts[2]) if len(parts) == 3 else hw)
        elif data != b"released":  # a queue release changes no watermark
            del self._entries[channel]  # "gone", or a format this sidecar does not know

    def begin(self, channels: Iterable[bytes]) -> list[int]:
        """Before a read: the change counts to hand to done()."""
        marks = []
        for channel in channels:
            state = self._reads.setdefault(channel, [0, 0])
            state[0] += 1
            marks.append(state[1])
        return marks

    def done(
        self,
        channels: Iterable[bytes],
        marks: list[int],
        values: list[tuple[int, int, int]] | None,
    ) -> None:
        """After a read (values None: it failed); must follow every begin()."""
        live = values is not None and self.live()
        for i, (channel, mark) in enumerate(zip(channels, marks, strict=True)):
            state = self._reads[channel]
            if live and state[1] == mark and values is not None:
                self._entries[channel] = values[i]
            state[0] -= 1
            if not state[0]:
                del self._reads[channel]


class Wakeups:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis
        self.watermarks = WatermarkCache()
        # A Redis Cluster relays publishes between nodes over its bus, which may drop
        # them while the subscription itself stays up: no cache there.
        self.watermarks.enabled = not hasattr(redis, "nodes_manager")
        self._waiters: dict[bytes, set[asyncio.Event]] = defaultdict(set)
        # Called with a topic's name when its registry entry changed (keys.TOPICS_CHANNEL).
        self.topic_listeners: list[Callable[[str], None]] = []
        # Called with the message on other channels that are no partition's (under the
        # pattern: keys.BROKER_CONFIGS_CHANNEL).
        self.channel_listeners: dict[bytes, list[Callable[[bytes], None]]] = {}
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

    def _received(self, channel: bytes, data: bytes) -> None:
        if channel == TOPICS_CHANNEL:
            name = data.decode(errors="replace")
            for listener in self.topic_listeners:
                listener(name)
            return
        listeners = self.channel_listeners.get(channel)
        if listeners is not None:
            for other in listeners:
                other(data)
            return
        self.watermarks.published(channel, data)
        for event in self._waiters.get(channel, ()):
            event.set()

    async def _listen(self) -> None:
        lost_at: float | None = None
        loop = asyncio.get_running_loop()
        while True:
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.psubscribe(keys.WAKE_PATTERN)
                # Its PONG comes after the subscription is in place: the cache starts then.
                await pubsub.ping(PING)
                heard = loop.time()
                self._subscribed.set()
                if lost_at is not None:
                    log.warning("wake-up subscription restored after %.1f s", loop.time() - lost_at)
                    lost_at = None
                    # Appends may have happened meanwhile: let waiting fetches re-read.
                    self._wake_all()
                # Messages are read straight off the connection with hiredis, many per
                # socket read: redis-py's get_message per message was a tenth of the
                # sidecar's CPU under produce load (it hears its own PUBLISH per append).
                parser = pubsub.connection._parser
                reader = parser._reader
                while True:
                    message = reader.gets()
                    if message is NOT_ENOUGH_DATA:
                        try:
                            # A bounded wait, so a Sentinel failover is noticed within a second.
                            async with asyncio.timeout(1.0):
                                await parser.read_from_socket()
                            continue
                        except TimeoutError:
                            pass
                        if self._stale(pubsub):
                            raise ConnectionError("the Redis primary changed")
                        if loop.time() - heard > DEAD_S:
                            raise ConnectionError(f"no PONG for {DEAD_S:.0f} s")
                        # Quiet: a PING proves the subscription live (for the cache).
                        await pubsub.ping(PING)
                        continue
                    if isinstance(message, Exception):
                        raise message
                    heard = loop.time()
                    self.watermarks.alive()
                    kind = message[0]
                    if kind == b"pmessage":
                        self._received(message[2], message[3])
            except asyncio.CancelledError:
                self.watermarks.lost()
                await _close(pubsub)
                raise
            except Exception as exc:  # connection lost: wake everyone, resubscribe
                self.watermarks.lost()
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
