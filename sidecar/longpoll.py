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
from typing import Any

from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from sidecar.storage import connection, keys

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
                self._subscribed.set()
                if lost_at is not None:
                    log.warning("wake-up subscription restored after %.1f s", loop.time() - lost_at)
                    lost_at = None
                    # Appends may have happened meanwhile: let waiting fetches re-read.
                    self._wake_all()
                # Messages are read straight off the connection with hiredis, many per
                # socket read, by the transport's own protocol (_Messages): redis-py's
                # get_message per message was a tenth of the sidecar's CPU under produce
                # load (it hears its own PUBLISH per append), and a reader task with a
                # 1 s timeout per read still cost a task wake-up and a timer per message.
                stream = _Messages.attach(self, pubsub, loop)
                while True:
                    failure = None
                    try:
                        async with asyncio.timeout(1.0):
                            failure = await asyncio.shield(stream.failed)
                    except TimeoutError:
                        pass
                    if failure is not None:
                        raise failure
                    if loop.time() - stream.heard < 1.0:
                        continue
                    # Quiet for a second: a PING proves the subscription live (for the
                    # cache), within a second of a Sentinel failover.
                    if self._stale(pubsub):
                        raise ConnectionError("the Redis primary changed")
                    if loop.time() - stream.heard > DEAD_S:
                        raise ConnectionError(f"no PONG for {DEAD_S:.0f} s")
                    await pubsub.ping(PING)
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


class _Messages(asyncio.Protocol):
    """The subscription connection's protocol once subscribed (set on its transport in
    place of redis-py's stream reader): each socket read is fed to hiredis and every
    message handled right there. A failure (a lost connection, an error reply) is the
    result of `failed`, which the listening task waits on."""

    def __init__(self, wakeups: Wakeups, reader: Any, replaced: Any, now: float) -> None:
        self.wakeups = wakeups
        self.reader = reader
        self.replaced = replaced  # redis-py's protocol: told of the loss (ends disconnect)
        self.loop = asyncio.get_running_loop()
        self.failed: asyncio.Future[Exception] = self.loop.create_future()
        self.heard = now  # loop time of the last message or PONG

    @classmethod
    def attach(cls, wakeups: Wakeups, pubsub: PubSub, loop: asyncio.AbstractEventLoop) -> _Messages:
        conn = pubsub.connection
        assert conn is not None
        stream = cls(wakeups, conn._parser._reader, None, loop.time())  # type: ignore[union-attr]
        _, stream.replaced, data = connection.take_over(conn, stream)
        stream.data_received(data)  # also what hiredis holds already (the PONG)
        return stream

    def data_received(self, data: bytes) -> None:
        if self.failed.done():
            return
        wakeups = self.wakeups
        reader = self.reader
        try:
            reader.feed(data)
            message = reader.gets()
            if message is NOT_ENOUGH_DATA:
                return
            self.heard = self.loop.time()
            wakeups.watermarks.alive()
            while message is not NOT_ENOUGH_DATA:
                if isinstance(message, Exception):
                    raise message
                if message[0] == b"pmessage":
                    wakeups._received(message[2], message[3])
                message = reader.gets()
        except Exception as exc:
            self.failed.set_result(exc)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.failed.done():
            self.failed.set_result(ConnectionError(f"wake-up connection lost: {exc}"))
        self.replaced.connection_lost(exc)


async def _close(pubsub: PubSub) -> None:
    try:
        await asyncio.wait_for(pubsub.aclose(), 2.0)
    except Exception:  # the connection is dead already
        pass
