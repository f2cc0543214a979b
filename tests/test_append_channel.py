"""The append channel (storage/append_channel.py): replies handed out in order by the
connection's own protocol, and the bound of a resilience.run(bounded=True) attempt
kept by the channel's one timer instead of an asyncio.timeout per call."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import hiredis
import pytest
import uvloop
from conftest import RedisServer, start_redis, stop_process
from redis.exceptions import ResponseError

from sidecar.storage import append_channel, resilience
from sidecar.storage.connection import client_for


def _run(main: object) -> None:
    uvloop.run(main)  # type: ignore[arg-type]


def test_replies_in_order_errors_and_multi_exec(redis_server: RedisServer) -> None:
    async def main() -> None:
        redis = client_for(redis_server.url, 5.0)
        channel = append_channel.for_client(redis)
        try:
            calls = [channel.call(hiredis.pack_command(("ECHO", str(i)))) for i in range(50)]
            assert await asyncio.gather(*calls) == [str(i).encode() for i in range(50)]
            # MULTI, two commands, EXEC: four replies, the call gets EXEC's.
            parts = [
                hiredis.pack_command(("MULTI",)),
                hiredis.pack_command(("ECHO", "a")),
                hiredis.pack_command(("ECHO", "b")),
                hiredis.pack_command(("EXEC",)),
            ]
            assert await channel.call(parts, 4) == [b"a", b"b"]
            with pytest.raises(ResponseError):
                await channel.call(hiredis.pack_command(("NO-SUCH-COMMAND",)))
            assert await channel.call(hiredis.pack_command(("PING",))) == b"PONG"
        finally:
            await append_channel.close_for(redis)
            await redis.aclose()

    _run(main())


def test_a_hung_redis_fails_the_bounded_call_and_the_connection_is_left(tmp_path: Path) -> None:
    server = start_redis(tmp_path / "redis")

    async def main() -> None:
        redis = client_for(server.url, 5.0)
        channel = append_channel.for_client(redis)
        try:
            echo = hiredis.pack_command(("ECHO", "x"))
            assert await resilience.run(lambda: channel.call(echo), "echo", bounded=True) == b"x"
            first = channel._conn
            # Redis sleeps 5 s: the attempt's bound (0.25 s: MIN_ATTEMPT_S) passes first.
            server.client().execute_command("CLIENT", "PAUSE", "5000", "ALL")
            started = time.monotonic()
            with resilience.request_deadline(0.3):
                with pytest.raises(resilience.RedisUnavailable):
                    await resilience.run(lambda: channel.call(echo), "echo", bounded=True)
            assert time.monotonic() - started < 3.0  # well before Redis answers
            # Given up without its reply: the connection is closed ABANDON_GRACE_S later.
            await asyncio.sleep(append_channel.ABANDON_GRACE_S + 0.2)
            assert channel._conn is not first
            assert await channel.call(echo) == b"x"  # a new connection, once Redis answers
        finally:
            await append_channel.close_for(redis)
            await redis.aclose()

    try:
        _run(main())
    finally:
        stop_process(server.proc)


def test_the_bound_is_the_attempts() -> None:
    async def main() -> None:
        assert resilience.attempt_bound() is None
        seen: list[float | None] = []

        async def op() -> None:
            seen.append(resilience.attempt_bound())

        await resilience.run(op, "op", bounded=True)
        await resilience.run(op, "op")
        assert seen[0] is not None and seen[0] > 0 and seen[1] is None

    _run(main())
