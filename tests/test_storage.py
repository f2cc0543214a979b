"""Storage behaviour users rely on: script reload after a Redis restart (NOSCRIPT),
LogAppendTime, and the Redis layout other Redis clients see."""

from __future__ import annotations

import time
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import RedisServer, Skiff, start_skiff, stop_process


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def _consume(bootstrap: str, topic: str, count: int) -> list[confluent_kafka.Message]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[confluent_kafka.Message] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(got), 1.0):
            assert message.error() is None, message.error()
            got.append(message)
    consumer.close()
    return got


def test_script_reloaded_after_script_flush(
    skiff: Skiff, redis_server: RedisServer, topic: str
) -> None:
    _produce(skiff.bootstrap, topic, [b"before"])
    # What a Redis restart or failover does to the script cache.
    redis_server.client().script_flush()
    _produce(skiff.bootstrap, topic, [b"after"])
    got = _consume(skiff.bootstrap, topic, 2)
    assert [(m.offset(), m.value()) for m in got] == [(0, b"before"), (1, b"after")]


@pytest.mark.parametrize("storage_format", ["record", "batch"])
def test_log_append_time(
    own_redis: RedisServer, tmp_path: Path, topic: str, storage_format: str
) -> None:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--message-timestamp-type",
        "LogAppendTime",
        "--storage-format",
        storage_format,
    )
    try:
        before = int(time.time() * 1000)
        producer = Producer({"bootstrap.servers": server.bootstrap})
        producer.produce(topic, value=b"x", timestamp=1_000_000)
        assert producer.flush(30) == 0
        after = int(time.time() * 1000)
        (message,) = _consume(server.bootstrap, topic, 1)
        kind, ts = message.timestamp()
        assert kind == confluent_kafka.TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= ts <= after + 1000
    finally:
        stop_process(server.proc)


def test_stream_entries_readable_by_plain_redis(
    skiff: Skiff, redis_server: RedisServer, topic: str
) -> None:
    # A `record` topic: one plain stream entry per record.
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    new = NewTopic(topic, 1, 1, config={"skiff.storage.format": "record"})
    admin.create_topics([new])[topic].result(30)
    producer = Producer({"bootstrap.servers": skiff.bootstrap})
    producer.produce(topic, key=None, value=b"", timestamp=1234)
    producer.produce(
        topic, key=b"", value=None, headers=[("a", b"\x00\xff"), ("a", None)], timestamp=5678
    )
    assert producer.flush(30) == 0
    entries = redis_server.client().xrange(f"skiff:{{{topic}/0}}:log")
    assert entries == [
        (b"0-1", {b"t": b"1234", b"k": b"", b"v": b"", b"h": b"", b"f": b"1"}),
        # headers: count 2, "a" -> 00 ff, "a" -> null (zig-zag varints)
        (
            b"0-2",
            {
                b"t": b"5678",
                b"k": b"",
                b"v": b"",
                b"h": b"\x04\x02a\x04\x00\xff\x02a\x01",
                b"f": b"2",
            },
        ),
    ]
    meta = redis_server.client().hgetall(f"skiff:{{{topic}/0}}:meta")
    assert meta[b"hw"] == b"2" and meta[b"lso"] == b"0"
