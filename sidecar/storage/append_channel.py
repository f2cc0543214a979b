"""One dedicated Redis connection for appends, pipelined.

Every Produce append is one pre-packed EVALSHA (scripts.Script.run_packed). Through
redis-py's pool each cost a pool lock, a connection checkout and release, and
redis-py's reply reading with its hooks: about a quarter of the sidecar's CPU per
1,000-record Produce request (docs/performance.md). Here an append is written to one
connection the moment it is ready, and the connection's protocol (_Replies, set on
its transport once it is open, in place of redis-py's stream reader) hands each reply
to the append it answers as it is read, in order (Redis answers a connection's commands
in the order sent), many replies per socket read, with no reader task woken per reply.

Failure handling stays with the retry policy (resilience.run): a dropped connection
fails every append in flight on it with a connection error, and each is resent with
its own append token on a new connection (lua/append.lua answers a resent token with
the first run's offset). An append abandoned without its reply (its attempt timed
out, or its request was cancelled) closes the connection if the reply has not come
ABANDON_GRACE_S later: a hung Redis is then left, as a timed-out pooled connection
was, without cutting off appends that are merely slow.

The connection is made by the client's own pool class (pool.make_connection), so
TLS, AUTH, SELECT, unix sockets and a Sentinel-managed primary work as for every
other command. A READONLY reply (a demoted primary) closes it: the resend asks the
sentinels again. Not used on a Redis Cluster (a node per slot: cluster_client.py)
nor for appends followed by WAIT (WAIT would hold up every reply behind it).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Awaitable
from typing import Any, TypeVar

from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sidecar.storage import connection, resilience

log = logging.getLogger(__name__)
T = TypeVar("T")

ABANDON_GRACE_S = 0.5
# Past this many bytes unsent in the transport, an append waits for the socket.
HIGH_WATER = 4 << 20


class _Closed(RedisConnectionError):
    pass


class _Replies(asyncio.Protocol):
    """The append connection's protocol once it is open (it replaces redis-py's stream
    reader on the transport): each socket read is fed to hiredis and every whole reply
    handed to its call right there, with no reader task woken per reply."""

    def __init__(self, channel: AppendChannel, conn: Any) -> None:
        self.channel = channel
        self.conn = conn
        self.reader = conn._parser._reader
        self.paused = False
        self.drained: asyncio.Future[None] | None = None
        # redis-py's protocol, told of the loss too: its close waiter ends disconnect().
        self.replaced: asyncio.BaseProtocol | None = None

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        pending = self.channel._pending
        try:
            reader.feed(data)
            while (reply := reader.gets()) is not NOT_ENOUGH_DATA:
                if not pending:
                    raise RedisConnectionError("a Redis reply nobody asked for")
                entry = pending[0]
                if entry[1]:
                    entry[1] -= 1
                    continue
                pending.popleft()
                if not entry[0].done():
                    entry[0].set_result(reply)
        except Exception as exc:
            if not isinstance(exc, RedisConnectionError):
                exc = RedisConnectionError(f"append connection: {exc}")
            self.channel._fail(self.conn, exc)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost fails what is in flight

    def connection_lost(self, exc: Exception | None) -> None:
        self.channel._fail(self.conn, RedisConnectionError(f"append connection lost: {exc}"))
        self.resume_writing()
        if self.replaced is not None:
            self.replaced.connection_lost(exc)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        drained, self.drained = self.drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    async def drain(self) -> None:
        if self.paused:
            if self.drained is None:
                self.drained = asyncio.get_running_loop().create_future()
            await self.drained


class AppendChannel:
    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._conn: Any = None
        self._protocol: _Replies | None = None
        self._transport: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connecting: asyncio.Future[Any] | None = None
        # Per call sent and not yet answered: [the future its last reply goes to,
        # replies to skip before that one, loop time by which it must come or None, the
        # attempt's bound in seconds].
        self._pending: deque[list[Any]] = deque()
        # One timer for every call's bound (resilience.run(bounded=True)), set for the
        # earliest: an asyncio.timeout per call cost a timer each.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self.closed = False

    async def call(self, packed: bytes | list[bytes], replies: int = 1) -> Any:
        """Send packed commands (bytes, or a list of parts written as they are) that
        get `replies` replies, and return the last one (MULTI ... EXEC: EXEC's). Inside
        a resilience.run(bounded=True) attempt, a reply later than the attempt's bound
        fails the call with a TimeoutError (the reply, if it comes, is skipped)."""
        bound = resilience.attempt_bound()
        conn = self._conn
        if conn is None:
            conn = await _within(bound, self._connect(), "no append connection")
            if conn is not self._conn:
                # Lost while this call waited for it: nothing was sent (and a future put
                # in the next connection's queue would take another call's reply).
                raise _Closed("the append connection closed as it opened")
        loop = self._loop
        assert loop is not None
        future = loop.create_future()
        resilience.mark_sent()
        transport = self._transport
        if isinstance(packed, list):
            transport.writelines(packed)
        else:
            transport.write(packed)
        if bound is None:
            self._pending.append([future, replies - 1, None, None])
        else:
            due = loop.time() + bound
            self._pending.append([future, replies - 1, due, bound])
            if due < self._timer_at:
                self._arm(loop, due)
        if transport.get_write_buffer_size() > HIGH_WATER:
            assert self._protocol is not None
            await _within(bound, self._protocol.drain(), "the append connection did not drain")
        try:
            reply = await future
        except asyncio.CancelledError:
            if not future.done():
                loop.call_later(ABANDON_GRACE_S, self._check_abandoned, conn, future)
            raise
        if isinstance(reply, Exception):
            if isinstance(reply, ReadOnlyError):
                self._drop(conn, RedisConnectionError("the Redis primary is now a replica"))
            raise reply
        return reply

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(at, self._expire)
        self._timer_at = at

    def _expire(self) -> None:
        """Fail the calls past their bound, as asyncio.timeout would have; each is
        given up, so its connection closes if the reply has not come ABANDON_GRACE_S
        later. Then wait for the next bound."""
        self._timer, self._timer_at = None, math.inf
        loop = self._loop
        assert loop is not None
        now = loop.time()
        nearest = math.inf
        for future, _, due, bound in self._pending:
            if due is None or future.done():
                continue
            if due <= now:
                future.set_exception(RedisTimeoutError(f"no reply within {bound:.2f} s"))
                loop.call_later(ABANDON_GRACE_S, self._check_abandoned, self._conn, future)
            elif due < nearest:
                nearest = due
        if nearest < math.inf:
            self._arm(loop, nearest)

    async def _connect(self) -> Any:
        if self.closed:
            raise _Closed("the append channel is closed")
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done() and self._connecting is connecting:
                self._connecting = None

    async def _open(self) -> Any:
        conn = self._pool.make_connection()
        await conn.connect()
        protocol = _Replies(self, conn)
        transport, protocol.replaced, leftover = connection.take_over(conn, protocol)
        self._conn, self._protocol, self._transport = conn, protocol, transport
        self._loop = asyncio.get_running_loop()
        if leftover:  # (none: nothing was sent since the handshake)
            protocol.data_received(leftover)
        return conn

    def _check_abandoned(self, conn: Any, future: asyncio.Future[Any]) -> None:
        if conn is self._conn and any(entry[0] is future for entry in self._pending):
            log.warning(
                "no Redis reply to an append for %.1f s after it was given up; "
                "reconnecting the append connection",
                ABANDON_GRACE_S,
            )
            self._drop(conn, RedisConnectionError("no reply from Redis"))

    def _drop(self, conn: Any, exc: Exception) -> None:
        self._fail(conn, exc)

    def _fail(self, conn: Any, exc: Exception) -> None:
        """Every append in flight on `conn` fails with exc; the next makes a new one."""
        if conn is not self._conn:
            return
        self._conn = self._protocol = self._transport = None
        pending, self._pending = self._pending, deque()
        for entry in pending:
            if not entry[0].done():
                entry[0].set_exception(exc)
        writer = conn._writer
        if writer is not None:
            writer.transport.abort()
        asyncio.ensure_future(conn.disconnect(nowait=True))

    async def close(self) -> None:
        self.closed = True
        conn = self._conn
        if conn is not None:
            self._fail(conn, _Closed("the append channel is closed"))


async def _within(bound: float | None, work: Awaitable[T], what: str) -> T:
    """`work`, within `bound` seconds when there is one (rare waits of a call: a new
    connection, a full socket)."""
    if bound is None:
        return await work
    try:
        async with asyncio.timeout(bound):
            return await work
    except TimeoutError:
        raise RedisTimeoutError(f"{what} within {bound:.2f} s") from None


def for_client(redis: Any) -> AppendChannel:
    """The client's append channel, made on first use."""
    channel = getattr(redis, "_skiff_append_channel", None)
    if channel is None:
        channel = AppendChannel(redis.connection_pool)
        redis._skiff_append_channel = channel
    return channel


async def close_for(redis: Any) -> None:
    channel = getattr(redis, "_skiff_append_channel", None)
    if channel is not None:
        await channel.close()
