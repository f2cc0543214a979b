"""Compaction (cleanup.policy=compact): the background compactor keeps the latest record
per key with its offset unchanged, removes tombstones once older than
delete.retention.ms, honours min.compaction.lag.ms, never removes the log's last record;
consumers (raw Fetch, confluent-kafka, Java) read a compacted log with gaps to its end.
Records without a key are refused at produce time, as Kafka does. The tests with the
`sidecar` fixture run on both storage formats with the same expectations: on `batch`
topics the compactor rebuilds batches into a new stream and swaps it in."""

from __future__ import annotations

import datetime
import http.client
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from clients import java_client
from confluent_kafka import Consumer, TopicPartition
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import (
    INVALID_RECORD,
    NONE,
    create,
    fetch,
    new_topic,
    produce,
    read_from,
    wait_for,
)
from rawkafka import RawKafka, Rec, build_batch, fetched_records, read_batches


@pytest.fixture(params=["record", "batch"])
def storage_format(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sidecar(own_redis: RedisServer, tmp_path: Path, storage_format: str) -> Skiff:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--log-cleaner-backoff-ms",
        "100",
        "--storage-format",
        storage_format,
    )
    yield server
    stop_process(server.proc)


def keyed(pairs: list[tuple[str, str | None]], ts: int | None = None) -> bytes:
    return build_batch(
        [Rec(key=k.encode(), value=None if v is None else v.encode()) for k, v in pairs],
        base_timestamp=ts,
    )


def cleaned(redis: RedisServer, topic: str) -> int:
    return int(redis.client().hget(f"skiff:{{{topic}/0}}:meta", "cleaned") or 0)


def log_view(kafka: RawKafka, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in read_from(kafka, topic, 0)]  # type: ignore[misc]


def test_keeps_latest_value_per_key_with_offsets(
    sidecar: Skiff, own_redis: RedisServer, storage_format: str
) -> None:
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("compact")
        # Two new records over five kept is a dirty ratio of 2/7: above 0.25.
        create(kafka, topic, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.25"})
        for round_ in range(4):
            batch = keyed([(f"k{i}", f"r{round_}-{i}") for i in range(5)])
            assert produce(kafka, topic, batch).base_offset == 5 * round_
        wait_for(lambda: cleaned(own_redis, topic) == 20, what="a compaction pass")
        expected = [(15 + i, f"k{i}".encode(), f"r3-{i}".encode()) for i in range(5)]
        assert log_view(kafka, topic) == expected
        # A fetch at a removed offset gets the next kept record.
        p = fetch(kafka, topic, 3)
        assert p.error_code == NONE and p.log_start_offset == 0 and p.high_watermark == 20
        assert [r.offset for r in fetched_records(p.records)][:1] == [15]
        # The log goes on after compaction, and a second pass only looks at new records.
        produce(kafka, topic, keyed([("k0", "r4-0"), ("k9", "r4-9")]))
        wait_for(lambda: cleaned(own_redis, topic) == 22, what="a second pass")
        assert log_view(kafka, topic) == [
            *expected[1:],
            (20, b"k0", b"r4-0"),
            (21, b"k9", b"r4-9"),
        ]
        # What the stream holds: kept records, or batches keeping their last offset.
        stream = own_redis.client().xrange(f"skiff:{{{topic}/0}}:log")
        if storage_format == "batch":
            assert [(i, list(f)) for i, f in stream] == [(b"0-20", [b"b"]), (b"0-22", [b"b"])]
        else:
            assert [i for i, _ in stream] == [b"0-%d" % o for o in range(17, 23)]
    # Consumers read the log with its gaps to the end.
    consumer = Consumer(
        {
            "bootstrap.servers": sidecar.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 6:
            assert time.monotonic() < deadline
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append((msg.offset(), msg.key(), msg.value()))
        assert [o for o, _, _ in got] == [16, 17, 18, 19, 20, 21]
    finally:
        consumer.close()
    java = java_client.consume(sidecar.bootstrap, topic, 0, 0, 6)
    assert [(r["offset"], r["key"], r["value"]) for r in java] == [
        (16, b"k1", b"r3-1"),
        (17, b"k2", b"r3-2"),
        (18, b"k3", b"r3-3"),
        (19, b"k4", b"r3-4"),
        (20, b"k0", b"r4-0"),
        (21, b"k9", b"r4-9"),
    ]


def _http(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        payload = resp.read()
        return resp.status, json.loads(payload) if payload else None
    finally:
        conn.close()


def test_queue_group_reads_through_compaction(sidecar: Skiff, own_redis: RedisServer) -> None:
    """A queue group holds leases on records the background compactor then removes (on
    `batch` topics it rewrites the log and swaps it in): the holder still settles them,
    none is handed out again, the group's position and the kept records are intact."""
    topic, group, port = new_topic("cq"), f"g-{uuid.uuid4().hex[:8]}", sidecar.http_port
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        create(kafka, topic, {"cleanup.policy": "compact"})

        def post_round(n: int) -> None:
            records = [{"key": f"k{i}", "value": f"r{n}-{i}"} for i in range(5)]
            status, body = _http(port, "POST", f"/v1/topics/{topic}/records", {"records": records})
            assert status == 200, body

        post_round(0)
        wait_for(lambda: cleaned(own_redis, topic) == 5, what="a first pass (nothing to remove)")
        config = {"lock_ms": 60_000, "auto_offset_reset": "earliest"}
        assert _http(port, "PUT", f"/v1/queues/{group}", config)[0] == 201
        read = {"topics": [topic], "max_records": 5, "worker": "w1"}
        status, body = _http(port, "POST", f"/v1/queues/{group}/records:read", read)
        assert status == 200 and [r["offset"] for r in body["records"]] == [0, 1, 2, 3, 4]
        post_round(1)
        wait_for(lambda: cleaned(own_redis, topic) == 10, what="the pass removing round 0")
        assert log_view(kafka, topic) == [
            (5 + i, f"k{i}".encode(), f"r1-{i}".encode()) for i in range(5)
        ]

    def settle(action: str, worker: str, offset: int) -> int:
        body = {"worker": worker, "records": [{"topic": topic, "partition": 0, "offset": offset}]}
        return _http(port, "POST", f"/v1/queues/{group}/records:{action}", body)[0]

    assert [settle(a, "w1", o) for a, o in [("acknowledge", 0), ("cancel", 1), ("renew", 2)]] == [
        200,
        200,
        200,
    ]
    read = {"topics": [topic], "max_records": 10, "worker": "w2"}
    status, body = _http(port, "POST", f"/v1/queues/{group}/records:read", read)
    assert status == 200
    assert [(r["offset"], r["key"], r["value"], r["delivery_count"]) for r in body["records"]] == [
        (5 + i, f"k{i}", f"r1-{i}", 1) for i in range(5)
    ]
    status, desc = _http(port, "GET", f"/v1/queues/{group}")
    assert status == 200
    (part,) = desc["partitions"]
    assert (part["committed_offset"], part["next_offset"], part["pending"]) == (3, 10, 7)
    assert part["holders"] == {"w1": 2, "w2": 5}
    assert [settle("acknowledge", "w1", o) for o in (3, 4)] == [200, 200]
    assert _http(port, "GET", f"/v1/queues/{group}")[1]["partitions"][0]["committed_offset"] == 5


def test_tombstones_removed_after_delete_retention(sidecar: Skiff, own_redis: RedisServer) -> None:
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("tombstones")
        create(kafka, topic, {"cleanup.policy": "compact", "delete.retention.ms": "1500"})
        produce(kafka, topic, keyed([("a", "1"), ("b", "1"), ("c", "1")]))
        produce(kafka, topic, keyed([("a", None), ("b", "2"), ("d", "1")]))
        wait_for(lambda: cleaned(own_redis, topic) == 6, what="a compaction pass")
        # The tombstone for a stays while it is younger than delete.retention.ms.
        assert log_view(kafka, topic) == [
            (2, b"c", b"1"),
            (3, b"a", None),
            (4, b"b", b"2"),
            (5, b"d", b"1"),
        ]
        wait_for(lambda: len(log_view(kafka, topic)) == 3, what="the tombstone's removal")
        assert log_view(kafka, topic) == [(2, b"c", b"1"), (4, b"b", b"2"), (5, b"d", b"1")]


def test_last_record_is_never_removed(sidecar: Skiff, own_redis: RedisServer) -> None:
    old = int(time.time() * 1000) - 3_600_000
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("last")
        create(kafka, topic, {"cleanup.policy": "compact", "delete.retention.ms": "0"})
        produce(kafka, topic, keyed([("a", "1"), ("a", None)], ts=old))
        wait_for(lambda: cleaned(own_redis, topic) == 2, what="a compaction pass")
        # The tombstone is expired but is the last record: a consumer at 0 must find it.
        assert log_view(kafka, topic) == [(1, b"a", None)]


def test_min_compaction_lag_keeps_young_records(sidecar: Skiff, own_redis: RedisServer) -> None:
    now = int(time.time() * 1000)
    old = now - 7_200_000
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("lag")
        create(kafka, topic, {"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"})
        pairs = [(f"k{i}", "old") for i in range(3)]
        produce(kafka, topic, keyed(pairs, ts=old))
        produce(kafka, topic, keyed([(k, "older-but-later") for k, _ in pairs], ts=old + 1))
        produce(kafka, topic, keyed([(k, "young") for k, _ in pairs], ts=now))
        wait_for(lambda: cleaned(own_redis, topic) == 6, what="a compaction pass")
        assert [(o, v) for o, _, v in log_view(kafka, topic)] == [
            (3, b"older-but-later"),
            (4, b"older-but-later"),
            (5, b"older-but-later"),
            (6, b"young"),
            (7, b"young"),
            (8, b"young"),
        ]


def test_records_without_key_refused(sidecar: Skiff) -> None:
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("nokey")
        create(kafka, topic, {"cleanup.policy": "compact"})
        batch = build_batch([Rec(key=b"a", value=b"1"), Rec(value=b"2"), Rec(value=b"3")])
        p = produce(kafka, topic, batch)
        assert (p.error_code, p.base_offset, p.log_start_offset) == (INVALID_RECORD, -1, 0)
        why = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
        assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
            (1, why),
            (2, why),
        ]
        assert p.error_message.startswith(
            "One or more records have been rejected due to 2 record errors in total"
        )
        assert read_from(kafka, topic, 0) == []


def test_two_sidecars_share_the_work(own_redis: RedisServer, tmp_path: Path) -> None:
    """Sidecars sharing a Redis compact (and sweep) the partitions each leads (the lease
    keeps two from compacting one partition while their views of the live sidecars
    differ): every partition is done."""
    servers = [
        start_skiff(
            tmp_path / f"skiff{i}.log",
            "--redis-url",
            own_redis.url,
            "--log-cleaner-backoff-ms",
            "100",
            "--log-retention-check-interval-ms",
            "100",
        )
        for i in range(2)
    ]
    try:
        old = int(time.time() * 1000) - 3_600_000
        with RawKafka("127.0.0.1", servers[0].port) as kafka:
            compacted, expiring = new_topic("shared-c"), new_topic("shared-r")
            create(kafka, compacted, {"cleanup.policy": "compact"}, partitions=4)
            create(kafka, expiring, {"retention.ms": "1000"}, partitions=4)
            for p in range(4):
                batch = keyed([("a", "1"), ("a", "2"), ("b", "1")])
                assert produce(kafka, compacted, batch, p).error_code == NONE
                assert produce(kafka, expiring, keyed([("x", "1")], ts=old), p).error_code == 0
            client = own_redis.client()

            def meta(topic: str, p: int, name: str) -> int:
                return int(client.hget(f"skiff:{{{topic}/{p}}}:meta", name) or 0)

            wait_for(
                lambda: all(meta(compacted, p, "cleaned") == 3 for p in range(4)),
                what="every partition compacted",
            )
            wait_for(
                lambda: all(meta(expiring, p, "lso") == 1 for p in range(4)),
                what="every partition swept",
            )
            for p in range(4):
                got = [(r.offset, r.key, r.value) for r in read_from(kafka, compacted, 0, p)]
                assert got == [(1, b"a", b"2"), (2, b"b", b"1")]
    finally:
        for s in servers:
            stop_process(s.proc)


def _ms(at: Any) -> int:
    """kio reads a timestamp field as a datetime."""
    return int(at.timestamp() * 1000) if isinstance(at, datetime.datetime) else int(at)


def test_kept_records_unchanged(sidecar: Skiff, own_redis: RedisServer) -> None:
    """A cleaned batch holds the kept records as they were: LogAppendTime timestamps,
    headers, keys, values and offsets; its CRC is valid and its codec the producer's."""
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("unchanged")
        configs = {
            "cleanup.policy": "compact",
            "message.timestamp.type": "LogAppendTime",
            "min.cleanable.dirty.ratio": "0.01",
        }
        create(kafka, topic, configs)
        recs = [
            Rec(key=b"a", value=b"1", headers=(("h", b"x"),)),
            Rec(key=b"b", value=b"1"),
            Rec(key=b"a", value=b"2", headers=(("h", None), ("i", b""))),
        ]
        first = produce(kafka, topic, build_batch(recs, compression=1)).log_append_time
        second = produce(kafka, topic, keyed([("c", "1")])).log_append_time
        first, second = (_ms(t) for t in (first, second))
        wait_for(lambda: cleaned(own_redis, topic) == 4, what="a compaction pass")
        after = read_batches(fetch(kafka, topic, 0).records)
        assert all(b.crc_ok and b.timestamp_type == 1 for b in after)
        assert [r for b in after for r in b.records] == [
            Rec(key=b"b", value=b"1", timestamp=first, offset=1),
            Rec(key=b"a", value=b"2", headers=(("h", None), ("i", b"")), timestamp=first, offset=2),
            Rec(key=b"c", value=b"1", timestamp=second, offset=3),
        ]


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_compacted_log_read_with_compression(
    sidecar: Skiff, own_redis: RedisServer, codec: str
) -> None:
    """Fetch compresses batches built over gaps (per-record offset deltas)."""
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic(f"compact-{codec}")
        create(kafka, topic, {"cleanup.policy": "compact", "compression.type": codec})
        produce(kafka, topic, keyed([(f"k{i % 3}", f"v{i}") for i in range(12)]))
        wait_for(lambda: cleaned(own_redis, topic) == 12, what="a compaction pass")
        assert log_view(kafka, topic) == [
            (9, b"k0", b"v9"),
            (10, b"k1", b"v10"),
            (11, b"k2", b"v11"),
        ]
    consumer = Consumer(
        {"bootstrap.servers": sidecar.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}"}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < 3:
            assert time.monotonic() < deadline
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.offset())
        assert got == [9, 10, 11]
    finally:
        consumer.close()


def test_cleanup_policy_server_default(own_redis: RedisServer, tmp_path: Path) -> None:
    """--log-cleanup-policy (here from $SKIFF_LOG_CLEANUP_POLICY) is the default of
    cleanup.policy: topics created without it are compacted."""
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--log-cleaner-backoff-ms",
        "100",
        env={"SKIFF_LOG_CLEANUP_POLICY": "compact,delete"},
    )
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            topic = new_topic("default-policy")
            body = {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout": 10000,
                "validate_only": False,
            }
            [result] = kafka.request(19, 7, body).topics
            listed = {c.name: (c.value, c.config_source) for c in result.configs}
            assert listed["cleanup.policy"] == ("compact,delete", 4)  # STATIC_BROKER_CONFIG
            assert produce(kafka, topic, build_batch([Rec(value=b"x")])).error_code == (
                INVALID_RECORD
            )
            produce(kafka, topic, keyed([("a", "1"), ("a", "2")]))
            wait_for(lambda: cleaned(own_redis, topic) == 2, what="a compaction pass")
            assert log_view(kafka, topic) == [(1, b"a", b"2")]
    finally:
        stop_process(server.proc)
