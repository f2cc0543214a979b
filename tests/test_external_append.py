"""`batch` topics: a sidecar that knows a partition's next base offset XADDs the batch
itself, in a MULTI/EXEC with the append script (mode 'x'), so the batch's bytes never
pass through Lua (storage/store.py, RedisStore.append). Whatever the script refuses,
and a wrong prediction (another sidecar appended first, the topic was recreated), must
leave the log exactly as if the XADD never ran: entries only at batch ends, the
stream's last ID equal to the high watermark, no record stored twice or lost."""

from __future__ import annotations

from pathlib import Path

from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import DELETE_TOPICS, NONE, create, new_topic, produce, read_from
from rawkafka import RawKafka, Rec, build_batch
from test_idempotence import init_producer, send

BATCH = {"skiff.storage.format": "batch"}
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def _log(redis_server: RedisServer, topic: str) -> str:
    return f"skiff:{{{topic}/0}}:log"


def _entries(redis_server: RedisServer, topic: str) -> list[tuple[bytes, bytes]]:
    return [
        (entry_id, fields[b"b"])
        for entry_id, fields in redis_server.client().xrange(_log(redis_server, topic))
    ]


def _last_id_and_hw(redis_server: RedisServer, topic: str) -> tuple[bytes, int]:
    client = redis_server.client()
    last_id = client.xinfo_stream(_log(redis_server, topic))["last-generated-id"]
    hw = int(client.hget(f"skiff:{{{topic}/0}}:meta", "hw"))
    return last_id, hw


def _eval_calls(redis_server: RedisServer) -> int:
    return int(redis_server.client().info("commandstats").get("cmdstat_eval", {}).get("calls", 0))


def _batch(n: int, start: int) -> bytes:
    return build_batch([Rec(value=b"v%d" % i, key=b"k%d" % i) for i in range(start, start + n)])


def test_appends_after_the_first_skip_lua_and_store_the_same(
    skiff: Skiff, redis_server: RedisServer
) -> None:
    topic = new_topic("ext-same")
    batches = [_batch(10 + i, 100 * i) for i in range(5)]
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, BATCH)
        before = _eval_calls(redis_server)
        bases = [produce(kafka, topic, b).base_offset for b in batches]
        # The first append learns the partition's end; the four after it are 'x' appends.
        assert _eval_calls(redis_server) - before >= 4
        assert bases == [0, 10, 21, 33, 46]
        ends = [base + 10 + i for i, base in enumerate(bases)]
        assert _entries(redis_server, topic) == [
            (b"0-%d" % end, batch) for end, batch in zip(ends, batches, strict=True)
        ]
        assert _last_id_and_hw(redis_server, topic) == (b"0-60", 60)
        values = [r.value for r in read_from(kafka, topic, 0)]
        assert values == [b"v%d" % i for b in range(5) for i in range(100 * b, 100 * b + 10 + b)]


def test_two_sidecars_taking_turns_lose_and_repeat_nothing(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """Each append of one sidecar follows one of the other's: every prediction is wrong,
    the script takes the XADDed entry back, and the append runs again through Lua."""
    sidecars = [
        start_skiff(tmp_path / f"skiff-{i}.log", "--redis-url", own_redis.url) for i in range(2)
    ]
    topic = new_topic("ext-turns")
    try:
        clients = [RawKafka("127.0.0.1", s.port) for s in sidecars]
        create(clients[0], topic, BATCH)
        batches = [_batch(3 + i % 4, 10 * i) for i in range(12)]
        results = [produce(clients[i % 2], topic, b) for i, b in enumerate(batches)]
        assert [r.error_code for r in results] == [NONE] * 12
        ends, end = [], 0
        for i in range(12):
            end += 3 + i % 4
            ends.append(end)
        assert [r.base_offset for r in results] == [0, *ends[:-1]]
        assert _entries(own_redis, topic) == [
            (b"0-%d" % e, b) for e, b in zip(ends, batches, strict=True)
        ]
        assert _last_id_and_hw(own_redis, topic) == (b"0-%d" % end, end)
        # And one sidecar alone again predicts right.
        before = _eval_calls(own_redis)
        for i in range(3):
            assert produce(clients[1], topic, _batch(2, 500 + i)).base_offset == end + 2 * i
        assert _eval_calls(own_redis) - before >= 2
        assert _last_id_and_hw(own_redis, topic) == (b"0-%d" % (end + 6), end + 6)
        for client in clients:
            client.close()
    finally:
        for s in sidecars:
            stop_process(s.proc)


def test_refused_and_duplicate_batches_leave_no_entry(
    skiff: Skiff, redis_server: RedisServer
) -> None:
    topic = new_topic("ext-dup")
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, BATCH)
        error, pid, epoch = init_producer(kafka)
        assert error == NONE
        assert send(kafka, topic, [b"a", b"b"], pid, epoch, 0) == (NONE, 0)
        assert send(kafka, topic, [b"c", b"d", b"e"], pid, epoch, 2) == (NONE, 2)
        # A resent batch (lost reply): its first offset again, nothing stored.
        assert send(kafka, topic, [b"c", b"d", b"e"], pid, epoch, 2) == (NONE, 2)
        # A sequence gap: refused, nothing stored.
        assert send(kafka, topic, [b"f"], pid, epoch, 9)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert [e[0] for e in _entries(redis_server, topic)] == [b"0-2", b"0-5"]
        assert _last_id_and_hw(redis_server, topic) == (b"0-5", 5)
        # The next batch in sequence lands right behind.
        assert send(kafka, topic, [b"f"], pid, epoch, 5) == (NONE, 5)
        assert send(kafka, topic, [b"g"], pid, epoch, 6) == (NONE, 6)
        assert [e[0] for e in _entries(redis_server, topic)] == [b"0-2", b"0-5", b"0-6", b"0-7"]
        assert _last_id_and_hw(redis_server, topic) == (b"0-7", 7)
        values = [r.value for r in read_from(kafka, topic, 0)]
        assert values == [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]


def test_a_recreated_topic_starts_at_offset_zero(skiff: Skiff, redis_server: RedisServer) -> None:
    """The sidecar still predicts the old partition's end: the XADD of the prediction
    lands nowhere (no stream) or is taken back, and the batch gets offset 0."""
    topic = new_topic("ext-recreate")
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        for round_ in range(2):
            create(kafka, topic, BATCH)
            for i in range(3):
                p = produce(kafka, topic, _batch(4, 10 * i + round_))
                assert (p.error_code, p.base_offset) == (NONE, 4 * i)
            assert [e[0] for e in _entries(redis_server, topic)] == [b"0-4", b"0-8", b"0-12"]
            assert _last_id_and_hw(redis_server, topic) == (b"0-12", 12)
            [result] = kafka.request(
                DELETE_TOPICS, 6, {"topics": [{"name": topic}], "timeout": 5000}
            ).responses
            assert result.error_code == NONE
