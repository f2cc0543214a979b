"""Lua scripts from lua/: SCRIPT LOAD once, EVALSHA after. On NOSCRIPT (Redis restarted
without persistence, failed over, or SCRIPT FLUSH) the retry policy loads the script
again and resends: nothing ran (resilience.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import hiredis
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import resilience
from .instrumented import round_trip

LUA_DIR = Path(__file__).resolve().parents[2] / "lua"


class Script:
    def __init__(self, name: str) -> None:
        self.name = name
        self.source = (LUA_DIR / f"{name}.lua").read_text()
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()
        resilience.register_script(self.sha, self.source)

    async def load(self, redis: Redis) -> None:
        sha = await redis.script_load(self.source)
        if sha != self.sha:
            raise RuntimeError(f"Redis returned SHA {sha} for {self.name}.lua, expected {self.sha}")

    async def __call__(self, redis: Redis, keys: list[str], args: list[Any]) -> Any:
        # redis is a resilience.ResilientRedis: it reloads the script on NOSCRIPT.
        return await redis.evalsha(self.sha, len(keys), *keys, *args)

    def pack(self, keys: list[str], args: list[Any]) -> bytes:
        """The EVALSHA command as RESP bytes, packed ahead of sending (see run_packed)."""
        return hiredis.pack_command(("EVALSHA", self.sha, len(keys), *keys, *args))

    @round_trip
    async def run_packed(
        self,
        redis: Redis,
        packed: bytes,
        keys: list[str],
        args: list[Any],
        wait: tuple[int, int] | None = None,
    ) -> tuple[Any, int | None]:
        """Send a command packed by pack(): a pipelined Produce packs while the previous
        append to the same partition still runs, and sends the moment it finishes.

        wait=(replicas, timeout_ms) sends `WAIT replicas timeout_ms` right behind it on
        the same connection (WAIT covers that connection's writes) in the same round
        trip. Returns (reply, replicas that acknowledged, or None without wait).
        One attempt: the caller runs it under resilience.run (NOSCRIPT included)."""
        pool = redis.connection_pool
        conn = await pool.get_connection()
        send = packed
        if wait is not None:
            send += hiredis.pack_command(("WAIT", wait[0], wait[1]))
        try:
            await conn.send_packed_command(send)
            try:
                reply = await conn.read_response()
            except ResponseError:
                if wait is not None:
                    await conn.read_response()  # WAIT's reply is still due
                raise
            acked = None
            if wait is not None:
                # WAIT may block for its whole timeout: read past the socket timeout.
                read = await conn.read_response(timeout=wait[1] / 1000 + 1.0)
                if read is None:
                    raise RedisTimeoutError("no reply to WAIT")
                acked = int(read)
        except ResponseError:
            await pool.release(conn)
            raise
        except BaseException:
            await conn.disconnect()  # a reply may still be in flight: never reuse
            await pool.release(conn)
            raise
        await pool.release(conn)
        return reply, acked


APPEND = Script("append")
BROKERS = Script("brokers")
GROUP_LEASE = Script("group_lease")
GROUP_WRITE = Script("group_write")
INIT_PRODUCER = Script("init_producer")
TOPIC_CAS = Script("topic_cas")
TRIM = Script("trim")
CLEANER = Script("cleaner")
ALL = (APPEND, BROKERS, GROUP_LEASE, GROUP_WRITE, INIT_PRODUCER, TOPIC_CAS, TRIM, CLEANER)

# Queue groups (sidecar/queues/core.py).
QUEUE_INIT = Script("queue_init")
QUEUE_ACQUIRE = Script("queue_acquire")
QUEUE_SETTLE = Script("queue_settle")
QUEUE_STATE = Script("queue_state")
QUEUE_DELIVERED = Script("queue_delivered")
ALL += (QUEUE_INIT, QUEUE_ACQUIRE, QUEUE_SETTLE, QUEUE_STATE, QUEUE_DELIVERED)
