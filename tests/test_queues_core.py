"""The queue core (sidecar/queues/core.py) against a real redis-server: leases, delivery
counts, release, renew, reject with dead-lettering, per-record errors, committed offsets
and reset. The HTTP front end is covered in test_queues_http.py."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from conftest import RedisServer

from sidecar.maintenance.compactor import Compactor
from sidecar.protocol.record_batch import decode_headers
from sidecar.queues import Action, QueueError, QueueStore, RecordError
from sidecar.storage import keys
from sidecar.storage.store import RedisStore


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture(params=["record", "batch"])
def fmt(request: pytest.FixtureRequest) -> str:
    """Every test runs on both storage formats with the same assertions."""
    return str(request.param)


async def _append(store: RedisStore, topic: str, p: int, records: list[Any]) -> None:
    n = len(records) // 5
    info = await store.get_topic(topic, fresh=True)
    assert info is not None
    ts = max(records[0::5])
    args = [n, 0, ts, records[0::5].index(ts), -1, -1, -1, *records]
    await store.append(store.prepare_records(info, p, args))


async def _entries(store: RedisStore, topic: str) -> list[Any]:
    """A topic's records as record-format entries, whatever its format."""
    return [e async for chunk in store.record_chunks(topic, 0, 0, 1 << 62) for e in chunk]


async def _setup(
    url: str, n: int, fmt: str, partitions: int = 1
) -> tuple[RedisStore, QueueStore, str]:
    store = await RedisStore.connect(url)
    store.storage_format_default = fmt  # dead-letter topics too
    topic = f"q-{uuid.uuid4().hex[:8]}"
    info = await store.create_topic(topic, partitions)
    assert info is not None and info.batch_format == (fmt == "batch")
    for p in range(partitions):
        if n:
            records: list[Any] = []
            for i in range(n):
                records += (1000 + i, f"k{i}".encode(), f"v{i}".encode(), b"", 0)
            await _append(store, topic, p, records)
    return store, QueueStore(store), topic


def test_leases_counts_release_and_commit(redis_server: RedisServer, fmt: str) -> None:
    async def go() -> None:
        store, q, topic = await _setup(redis_server.url, 10, fmt)
        group = f"g-{uuid.uuid4().hex[:6]}"
        await q.configure(group, lock_ms=1000, auto_offset_reset="earliest")
        a = await q.acquire(group, "a", topic, 0, 4)
        assert [r.offset for r in a] == [0, 1, 2, 3]
        assert [r.delivery_count for r in a] == [1] * 4
        assert a[0].key == b"k0" and a[0].value == b"v0" and a[0].timestamp == 1000
        b = await q.acquire(group, "b", topic, 0, 4)
        assert [r.offset for r in b] == [4, 5, 6, 7]  # nobody else gets a leased record
        assert await q.committed(group, topic, 0) == 0
        # Accept 0 and 1; b may not touch a's records; unknown offsets are not pending.
        done = await q.settle(group, "a", topic, 0, [0, 1], Action.ACCEPT)
        assert done == {0: None, 1: None}
        bad = await q.settle(group, "b", topic, 0, [2, 0, 9], Action.ACCEPT)
        assert bad == {
            2: RecordError.OTHER_HOLDER,
            0: RecordError.NOT_PENDING,
            9: RecordError.NOT_PENDING,
        }
        assert await q.committed(group, topic, 0) == 2
        # Release: available to the next reader at once, delivery count grows on it.
        assert await q.settle(group, "a", topic, 0, [2], Action.RELEASE) == {2: None}
        c = await q.acquire(group, "c", topic, 0, 1)
        assert [(r.offset, r.delivery_count) for r in c] == [(2, 2)]
        # Lease expiry: a's record 3 comes back to someone else, a's ack then fails.
        await q.settle(group, "b", topic, 0, [4, 5, 6, 7], Action.RENEW)
        await asyncio.sleep(1.05)
        got = await q.acquire(group, "d", topic, 0, 10)
        offsets = sorted(r.offset for r in got)
        assert offsets == [2, 3, 4, 5, 6, 7, 8, 9]
        counts = {r.offset: r.delivery_count for r in got}
        assert counts[3] == 2 and counts[2] == 3 and counts[8] == 1
        late = await q.settle(group, "a", topic, 0, [3], Action.ACCEPT)
        assert late == {3: RecordError.OTHER_HOLDER}
        # An expired lease still held (nobody took it yet) is LEASE_EXPIRED.
        await asyncio.sleep(1.05)
        assert await q.settle(group, "d", topic, 0, [9], Action.ACCEPT) == {
            9: RecordError.LEASE_EXPIRED
        }
        desc = await q.describe(group)
        (part,) = desc.partitions
        assert part.pending == 8 and part.committed == 2 and part.available == 8
        assert part.high_watermark == 10 and part.next_offset == 10
        await store.close()

    run(go())


def test_delivery_limit_dead_letters_with_headers(redis_server: RedisServer, fmt: str) -> None:
    async def go() -> None:
        store, q, topic = await _setup(redis_server.url, 3, fmt)
        group = f"g-{uuid.uuid4().hex[:6]}"
        dlq = f"{topic}.dlq"
        await q.configure(
            group,
            lock_ms=500,
            delivery_limit=2,
            dead_letter_topic=dlq,
            auto_offset_reset="earliest",
        )
        assert len(await q.acquire(group, "w", topic, 0, 1)) == 1  # offset 0, count 1
        await asyncio.sleep(0.55)
        again = await q.acquire(group, "w", topic, 0, 1)
        assert [(r.offset, r.delivery_count) for r in again] == [(0, 2)]
        await asyncio.sleep(0.55)
        # Count 2 = limit: offset 0 goes to the dead-letter topic; 1 is handed out.
        nxt = await q.acquire(group, "w", topic, 0, 1)
        assert [r.offset for r in nxt] == [1]
        # Explicit reject of 1 dead-letters it too.
        assert await q.settle(group, "w", topic, 0, [1], Action.REJECT) == {1: None}
        entries = await _entries(store, dlq)
        assert len(entries) == 2
        heads = [dict(decode_headers(e[1][7])) for e in entries]
        assert heads[0] == {
            "skiff.dlq.reason": b"delivery limit",
            "skiff.dlq.group": group.encode(),
            "skiff.dlq.topic": topic.encode(),
            "skiff.dlq.partition": b"0",
            "skiff.dlq.offset": b"0",
            "skiff.dlq.delivery.count": b"2",
        }
        assert heads[1]["skiff.dlq.reason"] == b"rejected"
        assert heads[1]["skiff.dlq.offset"] == b"1"
        assert heads[1]["skiff.dlq.delivery.count"] == b"1"
        assert [e[1][5] for e in entries] == [b"v0", b"v1"]
        assert await q.committed(group, topic, 0) == 2
        await store.close()

    run(go())


def test_reset_latest_default_unknown_group(redis_server: RedisServer, fmt: str) -> None:
    async def go() -> None:
        store, q, topic = await _setup(redis_server.url, 5, fmt)
        group = f"g-{uuid.uuid4().hex[:6]}"
        try:
            await q.acquire(group, "w", topic, 0, 1)
        except QueueError as exc:
            assert exc.code == "GROUP_NOT_FOUND"
        else:
            raise AssertionError("unknown group accepted")
        await q.configure(group)  # latest: only records appended from now on
        assert await q.acquire(group, "w", topic, 0, 10) == []
        assert await q.committed(group, topic, 0) == 5
        assert await q.reset(group, topic, 0, 3) == 3
        got = await q.acquire(group, "w", topic, 0, 10)
        assert [r.offset for r in got] == [3, 4]
        assert await q.reset(group, topic, 0, "earliest") == 0
        assert await q.settle(group, "w", topic, 0, [3], Action.ACCEPT) == {
            3: RecordError.NOT_PENDING
        }
        assert await q.release_holder(group, "w") == 0
        got = await q.acquire(group, "w", topic, 0, 2)
        assert await q.release_holder(group, "w") == 2
        assert [r.offset for r in await q.acquire(group, "x", topic, 0, 5)] == [0, 1, 2, 3, 4]
        t0 = time.monotonic()
        assert await q.committed(group, "nope", 0) == -1
        assert time.monotonic() - t0 < 5
        await store.close()

    run(go())


def test_a_failed_dead_letter_copy_is_made_later(redis_server: RedisServer, fmt: str) -> None:
    """A rejected record whose copy cannot be appended (the dead-letter partition is
    broken) is not handed out again: the next acquire after the lock copies it."""

    async def go() -> None:
        store, q, topic = await _setup(redis_server.url, 2, fmt)
        group = f"g-{uuid.uuid4().hex[:6]}"
        dlq = f"{topic}.dlq"
        await store.create_topic(dlq, 1)
        await q.configure(group, lock_ms=1000, dead_letter_topic=dlq, auto_offset_reset="earliest")
        got = await q.acquire(group, "w", topic, 0, 1)
        meta = f"skiff:{{{dlq}/0}}:meta"
        saved = await store.redis.hgetall(meta)
        await store.redis.delete(meta)  # appends to the dead-letter partition now fail
        assert await q.settle(group, "w", topic, 0, [got[0].offset], Action.REJECT) == {0: None}
        assert await _entries(store, dlq) == []
        assert await q.committed(group, topic, 0) == 0  # not finished: no copy yet
        await store.redis.hset(meta, mapping=saved)
        await asyncio.sleep(1.05)
        nxt = await q.acquire(group, "x", topic, 0, 5)
        assert [r.offset for r in nxt] == [1]  # offset 0 is not handed out again
        (entry,) = await _entries(store, dlq)
        heads = dict(decode_headers(entry[1][7]))
        assert heads["skiff.dlq.reason"] == b"rejected"
        assert heads["skiff.dlq.delivery.count"] == b"1"
        assert await q.committed(group, topic, 0) == 1
        await store.close()

    run(go())


def test_due_hint_follows_lock_changes_and_recreated_topics(
    redis_server: RedisServer, fmt: str
) -> None:
    """The scan-skipping hint never hides an available record: after the lock duration
    grows, after a topic is deleted and made again (its consumer group gone)."""

    async def go() -> None:
        store, q, topic = await _setup(redis_server.url, 3, fmt)
        group = f"g-{uuid.uuid4().hex[:6]}"
        await q.configure(group, lock_ms=300, auto_offset_reset="earliest")
        assert [r.offset for r in await q.acquire(group, "a", topic, 0, 1)] == [0]
        await q.configure(group, lock_ms=1500)
        await asyncio.sleep(0.5)  # past the old lock, not the new one
        assert [r.offset for r in await q.acquire(group, "b", topic, 0, 1)] == [1]
        await asyncio.sleep(1.1)
        got = await q.acquire(group, "b", topic, 0, 5)
        assert [(r.offset, r.delivery_count) for r in got] == [(0, 2), (2, 1)]
        # Deleted and created again: the consumer group is gone with the stream.
        await store.delete_topic(topic)
        await store.create_topic(topic, 1)
        records: list[Any] = [5, b"k", b"new", b"", 0]
        await _append(store, topic, 0, records)
        got = await q.acquire(group, "c", topic, 0, 5)
        assert [(r.offset, r.value) for r in got] == [(0, b"new")]
        assert await q.settle(group, "c", topic, 0, [0], Action.RELEASE) == {0: None}
        assert [r.delivery_count for r in await q.acquire(group, "d", topic, 0, 5)] == [2]
        await store.close()

    run(go())


def test_max_bytes_hands_the_rest_back_uncounted(redis_server: RedisServer, fmt: str) -> None:
    async def go() -> None:
        store, q, topic = await _setup(redis_server.url, 4, fmt)
        group = f"g-{uuid.uuid4().hex[:6]}"
        await q.configure(group, auto_offset_reset="earliest")
        got = await q.acquire(group, "a", topic, 0, 4, max_bytes=5)  # k0+v0 is 4 bytes
        assert [r.offset for r in got] == [0]
        rest = await q.acquire(group, "b", topic, 0, 10)
        assert [(r.offset, r.delivery_count) for r in rest] == [(1, 1), (2, 1), (3, 1)]
        await store.close()

    run(go())


async def _until_redis_time(store: RedisStore, ms: int) -> None:
    """Wait (bounded) until Redis's clock, the one leases are judged by, passes `ms`."""
    deadline = time.monotonic() + 30
    while True:
        secs, micros = await store.redis.time()
        if secs * 1000 + micros // 1000 > ms:
            return
        assert time.monotonic() < deadline, "Redis time did not reach the lease end"
        await asyncio.sleep(0.02)


def test_compaction_under_leases(redis_server: RedisServer, fmt: str) -> None:
    """Compaction removes records that are in flight. As Kafka's share partitions keep
    an acquired record's state whatever the log does (a consumer acknowledges an offset
    it finds no record at as a gap, which archives it): a removed record held under a
    lease can still be settled, it is finished instead of handed out again (on expiry or
    release), the cursor and the kept records' leases are untouched, and on `batch`
    topics the rewritten log keeps the group (lua/cleaner.lua `swap`)."""

    async def go() -> None:
        store = await RedisStore.connect(redis_server.url)
        store.storage_format_default = fmt
        topic = f"qc-{uuid.uuid4().hex[:8]}"
        assert await store.create_topic(topic, 1, {"cleanup.policy": "compact"}) is not None
        records: list[Any] = []
        for i, key in enumerate("abcdeabc"):  # 0-4 a..e, then 5-7 a, b, c again
            records += (1000 + i, key.encode(), f"v{i}".encode(), b"", 0)
        await _append(store, topic, 0, records[:25])
        await _append(store, topic, 0, records[25:])
        q = QueueStore(store)
        group = f"g-{uuid.uuid4().hex[:6]}"
        await q.configure(group, lock_ms=2000, auto_offset_reset="earliest")
        w1 = await q.acquire(group, "w1", topic, 0, 3)
        w2 = await q.acquire(group, "w2", topic, 0, 1)
        assert [(r.offset, r.key) for r in w1 + w2] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]

        info = await store.get_topic(topic, fresh=True)
        assert info is not None
        compactor = Compactor(store, None, 100)  # type: ignore[arg-type]
        result = await compactor.compact(info, 0)
        assert result is not None and (result.removed, result.kept) == (3, 5)
        assert [(int(e[0][2:]) - 1, e[1][3]) for e in await _entries(store, topic)] == [
            (3, b"d"),
            (4, b"e"),
            (5, b"a"),
            (6, b"b"),
            (7, b"c"),
        ]
        (part,) = (await q.describe(group)).partitions
        assert (part.next_offset, part.pending, part.committed) == (4, 4, 0)
        assert part.holders == {"w1": 3, "w2": 1}

        # A removed record's holder still settles it; released or renewed, it is done.
        assert await q.settle(group, "w1", topic, 0, [0], Action.ACCEPT) == {0: None}
        assert await q.settle(group, "w1", topic, 0, [1], Action.RELEASE) == {1: None}
        assert await q.settle(group, "w1", topic, 0, [1], Action.ACCEPT) == {
            1: RecordError.NOT_PENDING
        }
        (part,) = (await q.describe(group)).partitions
        assert (part.pending, part.committed, part.holders) == (2, 2, {"w1": 1, "w2": 1})
        # Not handed out again: the next reader gets the records never delivered.
        w3 = await q.acquire(group, "w3", topic, 0, 10)
        assert [(r.offset, r.key, r.value, r.delivery_count) for r in w3] == [
            (4, b"e", b"v4", 1),
            (5, b"a", b"v5", 1),
            (6, b"b", b"v6", 1),
            (7, b"c", b"v7", 1),
        ]
        assert await q.settle(group, "w3", topic, 0, [4, 5, 6, 7], Action.ACCEPT) == dict.fromkeys(
            [4, 5, 6, 7]
        )
        # Leases end: the kept record 3 comes back, the removed record 2 is finished.
        await _until_redis_time(store, max(r.lease_deadline_ms for r in w1 + w2))
        again = await q.acquire(group, "w4", topic, 0, 10)
        assert [(r.offset, r.key, r.delivery_count) for r in again] == [(3, b"d", 2)]
        assert await q.settle(group, "w1", topic, 0, [2], Action.ACCEPT) == {
            2: RecordError.NOT_PENDING
        }
        assert await q.committed(group, topic, 0) == 3
        assert await q.settle(group, "w4", topic, 0, [3], Action.ACCEPT) == {3: None}
        assert await q.committed(group, topic, 0) == 8
        # The log goes on: a record appended after the pass is handed out once.
        await _append(store, topic, 0, [2000, b"d", b"v8", b"", 0])
        assert [(r.offset, r.value) for r in await q.acquire(group, "w4", topic, 0, 10)] == [
            (8, b"v8")
        ]
        (part,) = (await q.describe(group)).partitions
        assert (part.high_watermark, part.next_offset, part.pending, part.committed) == (9, 9, 1, 8)
        await store.close()

    run(go())


def test_renewing_a_removed_record_finishes_it(redis_server: RedisServer, fmt: str) -> None:
    """Renew of a record compaction removed answers done and finishes it (a `record`
    topic's XCLAIM drops a deleted entry from the pending list; `batch` topics agree)."""

    async def go() -> None:
        store = await RedisStore.connect(redis_server.url)
        store.storage_format_default = fmt
        topic = f"qr-{uuid.uuid4().hex[:8]}"
        assert await store.create_topic(topic, 1, {"cleanup.policy": "compact"}) is not None
        await _append(store, topic, 0, [1, b"a", b"old", b"", 0, 2, b"b", b"x", b"", 0])
        await _append(store, topic, 0, [3, b"a", b"new", b"", 0])
        q = QueueStore(store)
        group = f"g-{uuid.uuid4().hex[:6]}"
        await q.configure(group, auto_offset_reset="earliest")
        assert [r.offset for r in await q.acquire(group, "w", topic, 0, 2)] == [0, 1]
        info = await store.get_topic(topic, fresh=True)
        assert info is not None
        result = await Compactor(store, None, 100).compact(info, 0)  # type: ignore[arg-type]
        assert result is not None and result.removed == 1
        assert await q.settle(group, "w", topic, 0, [0, 1], Action.RENEW) == {0: None, 1: None}
        assert await q.settle(group, "w", topic, 0, [0, 1], Action.ACCEPT) == {
            0: RecordError.NOT_PENDING,
            1: None,
        }
        assert await q.committed(group, topic, 0) == 2
        await store.close()

    run(go())


def test_deleting_a_topic_removes_queue_state(redis_server: RedisServer, fmt: str) -> None:
    """DeleteTopics removes every key of the partitions, the queue groups' own included
    (due hint; lease starts and delivery counts on `batch` topics); a topic made again
    under the name inherits nothing: the old holder's offsets are not pending."""

    async def go() -> None:
        store, q, topic = await _setup(redis_server.url, 4, fmt, partitions=2)
        group = f"g-{uuid.uuid4().hex[:6]}"
        await q.configure(group, lock_ms=60_000, auto_offset_reset="earliest")
        for p in (0, 1):
            assert [r.offset for r in await q.acquire(group, "w", topic, p, 3)] == [0, 1, 2]
            assert await q.settle(group, "w", topic, p, [1], Action.RELEASE) == {1: None}

        async def partition_keys() -> list[bytes]:
            return sorted([k async for k in store.redis.scan_iter(match=f"skiff:{{{topic}/*")])

        queue_keys = [k for k in await partition_keys() if b":q:" in k]
        kinds = {b"record": [b":due"], b"batch": [b":lease", b":rec"]}[fmt.encode()]
        assert queue_keys == sorted(
            f"skiff:{{{topic}/{p}}}:q:{group}{kind.decode()}".encode()
            for p in (0, 1)
            for kind in kinds
        )
        assert await store.delete_topic(topic)
        assert await partition_keys() == []
        info = await store.create_topic(topic, 2)
        assert info is not None and info.batch_format == (fmt == "batch")
        await _append(store, topic, 0, [7, b"k", b"new", b"", 0])
        assert await q.settle(group, "w", topic, 0, [0, 2], Action.ACCEPT) == {
            0: RecordError.NOT_PENDING,
            2: RecordError.NOT_PENDING,
        }
        assert await q.release_holder(group, "w") == 0
        got = await q.acquire(group, "w2", topic, 0, 5)
        assert [(r.offset, r.value, r.delivery_count) for r in got] == [(0, b"new", 1)]
        (part, *_) = (await q.describe(group)).partitions
        assert (part.pending, part.committed, part.holders) == (1, 0, {"w2": 1})
        await store.close()

    run(go())


def test_reading_past_batches_compaction_left_out(redis_server: RedisServer, fmt: str) -> None:
    """Whole batches compaction removed are passed in one step, as XREADGROUP passes
    deleted entries on a `record` topic: not one leased-and-finished gap offset after
    another (a handful of scripts, not thousands)."""

    async def go() -> None:
        store = await RedisStore.connect(redis_server.url)
        store.storage_format_default = fmt
        topic = f"qg-{uuid.uuid4().hex[:8]}"
        assert await store.create_topic(topic, 1, {"cleanup.policy": "compact"}) is not None
        for round_ in range(3):
            records: list[Any] = []
            for i in range(1000):
                records += (round_, f"k{i}".encode(), f"r{round_}-{i}".encode(), b"", 0)
            await _append(store, topic, 0, records)
        info = await store.get_topic(topic, fresh=True)
        assert info is not None
        result = await Compactor(store, None, 100).compact(info, 0)  # type: ignore[arg-type]
        assert result is not None and (result.removed, result.kept) == (2000, 1000)
        q = QueueStore(store)
        group = f"g-{uuid.uuid4().hex[:6]}"
        await q.configure(group, auto_offset_reset="earliest")
        before = (await store.redis.info("commandstats"))["cmdstat_evalsha"]["calls"]
        got = await q.acquire(group, "w", topic, 0, 5)
        calls = (await store.redis.info("commandstats"))["cmdstat_evalsha"]["calls"] - before
        assert [(r.offset, r.value, r.delivery_count) for r in got] == [
            (2000 + i, f"r2-{i}".encode(), 1) for i in range(5)
        ]
        assert calls <= 10, calls
        (part,) = (await q.describe(group)).partitions
        assert (part.committed, part.next_offset, part.pending) == (2000, 2005, 5)
        await store.close()

    run(go())


def test_max_record_locks_holds_under_concurrent_fetches_of_two_sidecars(
    redis_server: RedisServer, fmt: str
) -> None:
    """group.share.partition.max.record.locks (here 25) with two QueueStores on their
    own connections, as two sidecars: 20 fetches at once acquire exactly the first 25
    records between them, none twice; finishing 10 makes room for exactly 10 more."""

    async def go() -> None:
        store, _, topic = await _setup(redis_server.url, 100, fmt)
        other = await RedisStore.connect(redis_server.url)
        group = f"g-{uuid.uuid4().hex[:6]}"
        qs = [QueueStore(store, max_record_locks=25), QueueStore(other, max_record_locks=25)]
        await qs[0].configure(group, lock_ms=60_000, auto_offset_reset="earliest")
        got = await asyncio.gather(
            *(qs[i % 2].acquire(group, f"w{i}", topic, 0, 7) for i in range(20))
        )
        offsets = sorted(r.offset for rs in got for r in rs)
        assert offsets == list(range(25))
        assert all(r.delivery_count == 1 for rs in got for r in rs)
        holders = {r.offset: f"w{i}" for i, rs in enumerate(got) for r in rs}
        for o in range(10):
            assert await qs[1].settle(group, holders[o], topic, 0, [o], Action.ACCEPT) == {o: None}
        got = await asyncio.gather(*(qs[i % 2].acquire(group, "x", topic, 0, 7) for i in range(6)))
        assert sorted(r.offset for rs in got for r in rs) == list(range(25, 35))
        assert await qs[0].acquire(group, "y", topic, 0, 7) == []
        await other.close()
        await store.close()

    run(go())


def test_a_reservation_left_behind_frees_its_room_on_expiry(redis_server: RedisServer) -> None:
    """`record` topics: a sidecar that died between reserving room under the cap
    (lua/queue_reserve.lua) and reading leaves its reservation; it holds its room only
    until it expires."""

    async def go() -> None:
        store, _, topic = await _setup(redis_server.url, 40, "record")
        group = f"g-{uuid.uuid4().hex[:6]}"
        q = QueueStore(store, max_record_locks=25)
        await q.configure(group, lock_ms=60_000, auto_offset_reset="earliest")
        secs, micros = await store.redis.time()
        expiry = secs * 1000 + micros // 1000 + 1500
        resv = keys.queue_partition_keys(group, topic, 0)[3]
        await store.redis.zadd(resv, {"dead:10": expiry})  # as the dead sidecar left it
        assert [r.offset for r in await q.acquire(group, "w", topic, 0, 100)] == list(range(15))
        assert await q.acquire(group, "w", topic, 0, 100) == []
        await _until_redis_time(store, expiry)
        assert [r.offset for r in await q.acquire(group, "w", topic, 0, 100)] == list(range(15, 25))
        assert await store.redis.exists(resv) == 0
        await store.close()

    run(go())
