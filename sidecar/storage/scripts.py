"""Lua scripts from lua/: SCRIPT LOAD once, EVALSHA after. On NOSCRIPT (Redis restarted
without persistence, failed over, or SCRIPT FLUSH) the retry policy loads the script
again and resends: nothing ran (resilience.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import hiredis
from redis.asyncio import Redis
from redis.exceptions import AskError, MovedError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sidecar.storage import append_channel, cluster_client, resilience
from sidecar.storage.instrumented import round_trip

LUA_DIR = Path(__file__).resolve().parents[2] / "lua"


class Script:
    def __init__(self, name: str) -> None:
        self.name = name
        self.source = (LUA_DIR / f"{name}.lua").read_text()
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()
        self._eval_head: bytes | None = None
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

    @property
    def eval_source(self) -> str:
        """The source without comment lines and indentation, for EVAL: Redis hashes the
        body of every EVAL, and the comments were half of append.lua's bytes."""
        lines = (line.strip() for line in self.source.splitlines())
        return "\n".join(line for line in lines if line and not line.startswith("--"))

    def external_parts(
        self, keys: list[str], argv: list[Any], batch: bytes, predicted: int, count: int
    ) -> list[bytes]:
        """MULTI, `XADD keys[0] NOMKSTREAM 0-<predicted + count> b <batch>`, this script
        by EVAL with argv (its format argument 'x'), EXEC, as RESP parts to write as they
        are: the batch is not copied into a packed command, and its bytes never pass
        through Lua (lua/append.lua mode 'x'). EVAL, not EVALSHA: a NOSCRIPT inside EXEC
        would leave the XADD's entry without the script's bookkeeping."""
        if self._eval_head is None:
            source = self.eval_source.encode()
            self._eval_head = b"$4\r\nEVAL\r\n$%d\r\n%s\r\n" % (len(source), source)
        rest = hiredis.pack_command((len(keys), *keys, *argv))
        header_end = rest.index(b"\r\n") + 2
        arguments = int(rest[1 : header_end - 2])
        head = _MULTI + hiredis.pack_command(
            ("XADD", keys[0], "NOMKSTREAM", f"0-{predicted + count}", "b", "")
        )
        return [
            head[:-5] + b"%d\r\n" % len(batch),  # for the empty bulk string: "0\r\n\r\n"
            batch,
            b"\r\n*%d\r\n" % (arguments + 2) + self._eval_head + rest[header_end:] + _EXEC,
        ]

    @round_trip
    def run_parts(self, redis: Redis, parts: list[bytes]) -> Awaitable[Any]:
        """Send external_parts() on the append channel: EXEC's reply (one attempt; an
        error reply is raised). The channel's call itself, not a coroutine around it."""
        return append_channel.for_client(redis).call(parts, 4)

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
        One attempt: the caller runs it under resilience.run (NOSCRIPT included).
        On a Redis Cluster it goes to the primary of the keys' slot (one slot per script),
        and WAIT counts that primary's replicas."""
        if cluster_client.is_cluster(redis):
            return await self._run_on_node(redis, packed, keys, wait)
        if wait is None:
            return await append_channel.for_client(redis).call(packed), None
        pool = redis.connection_pool
        conn = await pool.get_connection()
        try:
            await conn.send_packed_command(_with_wait(packed, wait))
            reply, acked = await _read_replies(conn, wait)
        except ResponseError:
            await pool.release(conn)
            raise
        except BaseException:
            await conn.disconnect()  # a reply may still be in flight: never reuse
            await pool.release(conn)
            raise
        await pool.release(conn)
        return reply, acked

    async def _run_on_node(
        self, cluster: Any, packed: bytes, keys: list[str], wait: tuple[int, int] | None
    ) -> tuple[Any, int | None]:
        node = await cluster_client.node_for(cluster, keys[0])
        send = _with_wait(packed, wait)
        try:
            return await _exchange(cluster, node, send, wait, asking=False)
        except AskError as exc:
            if isinstance(exc, MovedError):
                raise  # the slot map is updated: resent by the retry policy
            # The slot is being migrated and the keys are on the importing node already:
            # ASKING + the command there (nothing ran on the first node).
            target = cluster.get_node(host=exc.host, port=exc.port)
            if target is None:
                raise
            return await _exchange(cluster, target, _ASKING + send, wait, asking=True)


_ASKING = hiredis.pack_command(("ASKING",))
_MULTI = hiredis.pack_command(("MULTI",))
_EXEC = hiredis.pack_command(("EXEC",))


async def _exchange(
    cluster: Any, node: Any, send: bytes, wait: tuple[int, int] | None, asking: bool
) -> tuple[Any, int | None]:
    """Send pre-packed commands on a connection of a cluster node and read the replies:
    [ASKING's,] the script's[, WAIT's]."""
    conn = node.acquire_connection()
    try:
        await conn.send_packed_command(send)
        if asking:
            await _skip_reply(conn)
        reply, acked = await _read_replies(conn, wait)
    except ResponseError as exc:
        node.release(conn)
        await cluster_client.after_failure(cluster, exc)  # MOVED: update the slot map
        raise
    except BaseException as exc:
        await conn.disconnect()
        node.release(conn)
        await cluster_client.after_failure(cluster, exc)
        raise
    node.release(conn)
    return reply, acked


def _with_wait(packed: bytes, wait: tuple[int, int] | None) -> bytes:
    """The packed command, with `WAIT replicas timeout_ms` behind it when asked."""
    return packed if wait is None else packed + hiredis.pack_command(("WAIT", *wait))


async def _read_replies(conn: Any, wait: tuple[int, int] | None) -> tuple[Any, int | None]:
    """The script's reply and, after a WAIT, how many replicas acknowledged."""
    try:
        reply = await conn.read_response()
    except ResponseError:
        if wait is not None:
            await _skip_reply(conn)  # WAIT's reply is still due
        raise
    if wait is None:
        return reply, None
    # WAIT may block for its whole timeout: read past the socket timeout.
    read = await conn.read_response(timeout=wait[1] / 1000 + 1.0)
    if read is None:
        raise RedisTimeoutError("no reply to WAIT")
    return reply, int(read)


async def _skip_reply(conn: Any) -> None:
    """Read a reply nobody needs; an error in it (WAIT on a node that was demoted
    meanwhile) must not replace the script's error (MOVED, READONLY)."""
    try:
        await conn.read_response()
    except ResponseError:
        pass


APPEND = Script("append")
BROKERS = Script("brokers")
GROUP_LEASE = Script("group_lease")
GROUP_WRITE = Script("group_write")
INIT_PRODUCER = Script("init_producer")
TXN = Script("txn")
TXN_MARKER = Script("txn_marker")
TXN_OFFSETS = Script("txn_offsets")
TXN_DEADLINE = Script("txn_deadline")
TOPIC_CAS = Script("topic_cas")
BROKER_CONFIG_CAS = Script("broker_config_cas")  # storage/broker_configs.py
TRIM = Script("trim")
CLEANER = Script("cleaner")
IDENTITY_CAS = Script("identity_cas")
ALL = (
    APPEND,
    BROKERS,
    GROUP_LEASE,
    GROUP_WRITE,
    INIT_PRODUCER,
    TXN,
    TXN_MARKER,
    TXN_OFFSETS,
    TXN_DEADLINE,
    TOPIC_CAS,
    BROKER_CONFIG_CAS,
    TRIM,
    CLEANER,
    IDENTITY_CAS,
)

# Queue groups (sidecar/queues/core.py).
QUEUE_INIT = Script("queue_init")
QUEUE_ACQUIRE = Script("queue_acquire")
QUEUE_SETTLE = Script("queue_settle")
QUEUE_STATE = Script("queue_state")
QUEUE_DELIVERED = Script("queue_delivered")
QUEUE_RESERVE = Script("queue_reserve")  # room under the cap on records in flight
QUEUE_INFLIGHT = Script("queue_inflight")  # the same on `batch` topics
ALL += (
    QUEUE_INIT,
    QUEUE_ACQUIRE,
    QUEUE_SETTLE,
    QUEUE_STATE,
    QUEUE_DELIVERED,
    QUEUE_RESERVE,
    QUEUE_INFLIGHT,
)

# ACLs (storage/acl_store.py).
ACLS = Script("acls")
ALL += (ACLS,)

# Tiered storage (sidecar/tiered/archiver.py).
ARCHIVE = Script("archive")
ALL += (ARCHIVE,)
