"""The writes the retry policy may send twice (storage/resilience.py) are safe to run
twice: run each the way a resend after a lost reply does, against a real Redis, and
check that the second run changes nothing and answers like the first. The one write
that is not safe to resend (lua/group_write.lua) is refused a resend: a lost reply
becomes RedisUnavailable(maybe_applied=True)."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import RedisServer

from sidecar.storage import keys, resilience, scripts
from sidecar.storage.group_store import CommittedOffset, GroupStore
from sidecar.storage.store import RedisStore


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_init_producer_resend_returns_the_first_answer(own_redis: RedisServer) -> None:
    async def main() -> None:
        store = await RedisStore.connect(own_redis.url)
        key = [keys.transactional_producer_key("tx")]
        first = await scripts.INIT_PRODUCER(store.redis, key, [7, -1, -1, 60000, 32767, "t1"])
        again = await scripts.INIT_PRODUCER(store.redis, key, [8, -1, -1, 60000, 32767, "t1"])
        assert first == again == [7, 0]
        # A client naming its current producer id and epoch (KIP-360): a resent bump
        # must not fence it.
        bump = await scripts.INIT_PRODUCER(store.redis, key, [9, 7, 0, 60000, 32767, "t2"])
        again = await scripts.INIT_PRODUCER(store.redis, key, [9, 7, 0, 60000, 32767, "t2"])
        assert bump == again == [7, 1]
        # A new request (new token) bumps again.
        assert await scripts.INIT_PRODUCER(store.redis, key, [9, 7, 1, 60000, 32767, "t3"]) == [
            7,
            2,
        ]
        await store.close()

    run(main())


def test_broker_register_resend_keeps_its_node_id(own_redis: RedisServer) -> None:
    async def main() -> None:
        store = await RedisStore.connect(own_redis.url)
        args = ["register", -1, "inc-a", "h", 1, 9000, 0]
        first = await scripts.BROKERS(store.redis, [keys.BROKERS], args)
        again = await scripts.BROKERS(store.redis, [keys.BROKERS], args)
        assert first[0] == again[0] == 0
        other = await scripts.BROKERS(
            store.redis, [keys.BROKERS], ["register", -1, "inc-b", "h", 2, 9000, 0]
        )
        assert other[0] == 1
        registered = await store.redis.hgetall(keys.BROKERS)
        assert {json.loads(v)["inc"] for v in registered.values()} == {"inc-a", "inc-b"}
        await store.close()

    run(main())


def test_group_write_is_not_resent_after_a_lost_reply(own_redis: RedisServer) -> None:
    """A commit whose reply times out (CLIENT PAUSE WRITE holds it, as a hung Redis
    would) is not sent again: RedisUnavailable(maybe_applied=True) at once."""

    async def main() -> None:
        store = await RedisStore.connect(own_redis.url)
        groups = GroupStore(store.redis)
        lease = keys.group_keys("g")[0]
        await store.redis.set(lease, "0:me")
        resilience.configure(timeout_ms=300, retry_ms=1500)
        admin = await RedisStore.connect(own_redis.url)
        try:
            await admin.redis.execute_command("CLIENT", "PAUSE", 1200, "WRITE")
            offset = CommittedOffset(5, -1, "", 0, -1)
            with pytest.raises(resilience.RedisUnavailable) as caught:
                await groups.commit("g", "0:me", {("t", 0): offset})
            assert caught.value.maybe_applied
            assert caught.value.reason == "timeout"
            # A read is retried until Redis answers again.
            await asyncio.sleep(1.0)
            # Ran at most once (a paused command dies with its closed connection).
            assert await groups.offsets("g") in ({}, {("t", 0): offset})
        finally:
            resilience.configure(timeout_ms=2000, retry_ms=8000)
            await admin.close()
            await store.close()

    run(main())
