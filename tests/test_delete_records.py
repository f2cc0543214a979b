"""DeleteRecords (v0-v2) and DescribeLogDirs (v0-v4) through raw requests, confluent-kafka's
AdminClient and the Java AdminClient; deleting a topic removes every Redis key of its
partitions. Expected answers are Apache Kafka 3.9's (tools/kafka_reference). The log
tests run on both storage formats with the same expected answers; on `batch` topics the
log start may fall inside a stored batch."""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from clients import java_client
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import (
    DELETE_TOPICS,
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    NONE,
    OFFSET_OUT_OF_RANGE,
    POLICY_VIOLATION,
    UNKNOWN_TOPIC_OR_PARTITION,
    create,
    delete_records,
    fetch,
    list_offset,
    new_topic,
    partition_keys,
    produce,
    read_from,
    wait_for,
)
from rawkafka import RawKafka, Rec, build_batch, fetched_records

DESCRIBE_LOG_DIRS = 35


BASE_TS = 1_700_000_000_000
FORMATS = pytest.mark.parametrize("storage_format", ["record", "batch"])


def formatted(storage_format: str) -> dict[str, str]:
    return {"skiff.storage.format": storage_format}


def fill(kafka: RawKafka, topic: str, n: int, partition: int = 0, key: bool = True) -> None:
    """n records v0.. with timestamps BASE_TS + index."""
    recs = [Rec(value=f"v{i}".encode(), key=f"k{i}".encode() if key else None) for i in range(n)]
    batch = build_batch(recs, base_timestamp=BASE_TS)
    assert produce(kafka, topic, batch, partition).error_code == NONE


@FORMATS
@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_moves_log_start(skiff: Skiff, version: int, storage_format: str) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        topic = new_topic("dr")
        create(kafka, topic, formatted(storage_format), partitions=2)
        fill(kafka, topic, 10, 0)
        fill(kafka, topic, 4, 1)
        assert delete_records(kafka, topic, {0: 6, 1: -1}, version) == {0: (NONE, 6), 1: (NONE, 4)}
        # Below the log start changes nothing; the answer is the current log start.
        assert delete_records(kafka, topic, {0: 2}, version) == {0: (NONE, 6)}
        # Up to the high watermark is allowed, beyond it is not.
        assert delete_records(kafka, topic, {0: 11}, version) == {0: (OFFSET_OUT_OF_RANGE, -1)}
        assert delete_records(kafka, topic, {0: -2}, version) == {0: (OFFSET_OUT_OF_RANGE, -1)}
        assert delete_records(kafka, topic, {5: 1}, version) == {
            5: (UNKNOWN_TOPIC_OR_PARTITION, -1)
        }
        assert list_offset(kafka, topic, EARLIEST) == (6, -1)
        # ListOffsets by time starts at the log start; max timestamp is still there.
        assert list_offset(kafka, topic, BASE_TS) == (6, BASE_TS + 6)
        assert list_offset(kafka, topic, BASE_TS + 8) == (8, BASE_TS + 8)
        assert list_offset(kafka, topic, MAX_TIMESTAMP) == (9, BASE_TS + 9)
        assert [r.value for r in read_from(kafka, topic, 6)] == [b"v6", b"v7", b"v8", b"v9"]
        assert fetch(kafka, topic, 5).error_code == OFFSET_OUT_OF_RANGE
        assert list_offset(kafka, topic, EARLIEST, 1) == (4, -1)
        assert list_offset(kafka, topic, LATEST, 1) == (4, -1)
        missing = delete_records(kafka, new_topic("nope"), {0: 0}, version)
        assert missing == {0: (UNKNOWN_TOPIC_OR_PARTITION, -1)}
        # Produce answers carry the new log start.
        p = produce(kafka, topic, build_batch([Rec(value=b"v10", key=b"k")]))
        assert (p.base_offset, p.log_start_offset) == (10, 6)


def test_delete_records_refused_on_compact_only_topic(skiff: Skiff) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        compact, both = new_topic("compact"), new_topic("both")
        create(kafka, compact, {"cleanup.policy": "compact"})
        create(kafka, both, {"cleanup.policy": "compact,delete"})
        for topic in (compact, both):
            fill(kafka, topic, 3)
        assert delete_records(kafka, compact, {0: 1}) == {0: (POLICY_VIOLATION, -1)}
        assert delete_records(kafka, both, {0: 1}) == {0: (NONE, 1)}


@FORMATS
def test_delete_records_confluent_admin(skiff: Skiff, storage_format: str) -> None:
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    topic = new_topic("dr-confluent")
    admin.create_topics([NewTopic(topic, 1, config=formatted(storage_format))])[topic].result(30)
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        wait_for(lambda: _exists(kafka, topic), what="topic")
        fill(kafka, topic, 8)
    tp = TopicPartition(topic, 0, 5)
    [future] = admin.delete_records([tp]).values()
    assert future.result(30).low_watermark == 5
    [future] = admin.delete_records([TopicPartition(topic, 0, -1)]).values()  # OFFSET_END
    assert future.result(30).low_watermark == 8
    [future] = admin.delete_records([TopicPartition(topic, 0, 9)]).values()
    with pytest.raises(KafkaException) as err:
        future.result(30)
    assert err.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


@FORMATS
def test_fetch_below_the_log_start_inside_a_batch(skiff: Skiff, storage_format: str) -> None:
    """DeleteRecords moves the log start into a batch: a fetch at the log start gets the
    batch holding it (on `batch` topics the whole stored batch, as Kafka serves a
    segment's batch; on `record` topics the records from there), one below it
    OFFSET_OUT_OF_RANGE; consumers see the records from the log start on."""
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        topic = new_topic("dr-inside")
        create(kafka, topic, formatted(storage_format))
        fill(kafka, topic, 10)
        assert delete_records(kafka, topic, {0: 6}) == {0: (NONE, 6)}
        at = fetch(kafka, topic, 6)
        assert (at.error_code, at.log_start_offset, at.high_watermark) == (NONE, 6, 10)
        first = 0 if storage_format == "batch" else 6
        got = [(r.offset, r.value) for r in fetched_records(at.records)]
        assert got == [(o, f"v{o}".encode()) for o in range(first, 10)]
        if storage_format == "batch":
            sent = build_batch(
                [Rec(value=f"v{i}".encode(), key=f"k{i}".encode()) for i in range(10)],
                base_timestamp=BASE_TS,
            )
            # The stored bytes as produced; only the partition leader epoch is the broker's.
            assert at.records[:12] + at.records[16:] == sent[:12] + sent[16:]
        for below in (5, 0):
            p = fetch(kafka, topic, below)
            assert (p.error_code, p.high_watermark, p.log_start_offset, p.records) == (
                OFFSET_OUT_OF_RANGE,
                -1,
                -1,
                b"",
            )
        assert list_offset(kafka, topic, EARLIEST) == (6, -1)
        assert list_offset(kafka, topic, BASE_TS + 2) == (6, BASE_TS + 6)
    consumer = Consumer(
        {
            "bootstrap.servers": skiff.bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        seen: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(seen) < 4:
            assert time.monotonic() < deadline, seen
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.append((msg.offset(), msg.value()))
        assert seen == [(o, f"v{o}".encode()) for o in range(6, 10)]
    finally:
        consumer.close()


def _exists(kafka: RawKafka, topic: str) -> bool:
    try:
        list_offset(kafka, topic, LATEST)
        return True
    except AssertionError:
        return False


@FORMATS
def test_delete_records_java_admin(skiff: Skiff, storage_format: str) -> None:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        topic = new_topic("dr-java")
        create(kafka, topic, formatted(storage_format))
        fill(kafka, topic, 8)
    assert java_client.delete_records(skiff.bootstrap, topic, 0, 3) == {"low_watermark": 3}
    beyond = java_client.delete_records(skiff.bootstrap, topic, 0, 9)
    assert beyond["error"] == "org.apache.kafka.common.errors.OffsetOutOfRangeException"
    got = java_client.consume(
        skiff.bootstrap, topic, 0, 0, 5, properties={"auto.offset.reset": "earliest"}
    )
    assert [(r["offset"], r["value"]) for r in got] == [(o, f"v{o}".encode()) for o in range(3, 8)]


def _describe(kafka: RawKafka, version: int, topics: Any) -> Any:
    [result] = kafka.request(DESCRIBE_LOG_DIRS, version, {"topics": topics}).results
    return result


@FORMATS
def test_describe_log_dirs(own_redis: RedisServer, tmp_path: Path, storage_format: str) -> None:
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", own_redis.url, "--storage-format", storage_format
    )
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            a, b = new_topic("dirs-a"), new_topic("dirs-b")
            create(kafka, a, partitions=2)
            create(kafka, b)
            batch = build_batch([Rec(value=b"x" * 50, key=b"k") for _ in range(5)])
            produce(kafka, a, batch, 0)
            produce(kafka, a, batch, 0)
            for version in (1, 2, 3, 4):
                everything = _describe(kafka, version, None)
                assert everything.log_dir == own_redis.url
                sizes = {
                    (t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
                    for t in everything.topics
                    for p in t.partitions
                }
                assert sizes == {
                    (a, 0): (2 * len(batch), 0, False),
                    (a, 1): (0, 0, False),
                    (b, 0): (0, 0, False),
                }
                if version >= 4:
                    assert (everything.total_bytes, everything.usable_bytes) == (-1, -1)
                # Only the requested partitions carry entries; every topic is listed.
                one = _describe(kafka, version, [{"topic": a, "partitions": [0]}])
                listed = {t.name: [p.partition_index for p in t.partitions] for t in one.topics}
                assert listed == {a: [0], b: []}
            delete_records(kafka, a, {0: 5})
            assert _describe(kafka, 4, [{"topic": a, "partitions": [0]}]).topics[0].partitions[
                0
            ].partition_size == len(batch)
            # v0 (kio has no schema for it): the same answer as v1, by hand.
            own_redis.client().config_set("maxmemory", 10 << 20)
            v4 = _describe(kafka, 4, [{"topic": b, "partitions": [0]}])
            assert v4.total_bytes == 10 << 20 and 0 < v4.usable_bytes < 10 << 20
            name = b.encode()
            body = struct.pack(">ih", 1, len(name)) + name + struct.pack(">ii", 1, 0)
            kafka.send_raw(_frame(DESCRIBE_LOG_DIRS, 0, 77, body))
            frame = kafka.recv_raw()
            legacy = kafka.decode_response(DESCRIBE_LOG_DIRS, 1, frame)
            listed = [
                (t.name, [p.partition_index for p in t.partitions])
                for t in legacy.results[0].topics
            ]
            assert listed == [(a, []), (b, [0])]
        java = java_client.log_dirs(server.bootstrap)
        [(broker, dirs)] = java["brokers"].items()
        [(log_dir, info)] = dirs.items()
        assert log_dir == own_redis.url and info["error"] is None
        assert info["replicas"][f"{a}-0"] == {
            "size": len(batch),
            "offset_lag": 0,
            "is_future": False,
        }
        assert set(info["replicas"]) == {f"{a}-0", f"{a}-1", f"{b}-0"}
    finally:
        stop_process(server.proc)


def _frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client = b"raw"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    return struct.pack(">i", len(header) + len(body)) + header + body


def test_delete_topic_removes_every_key(own_redis: RedisServer, tmp_path: Path) -> None:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--log-cleaner-backoff-ms",
        "50",
        "--log-retention-check-interval-ms",
        "50",
    )
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            topic = new_topic("gone")
            create(
                kafka,
                topic,
                {"cleanup.policy": "compact,delete", "retention.bytes": "100000"},
                partitions=3,
            )
            first_id = _topic_id(kafka, topic)
            for p in range(3):
                fill(kafka, topic, 20, p)
                fill(kafka, topic, 20, p)
            delete_records(kafka, topic, {0: 5})
            suffixes = {k.decode().rsplit(":", 1)[1] for k in partition_keys(own_redis, topic)}
            assert {"log", "meta", "time", "tokens", "bytes"} <= suffixes
            [result] = kafka.request(
                DELETE_TOPICS, 6, {"topics": [{"name": topic}], "timeout": 5000}
            ).responses
            assert result.error_code == NONE
            assert partition_keys(own_redis, topic) == []
            # Recreated: offsets start at 0 again, with a new topic id.
            create(kafka, topic, partitions=3)
            assert _topic_id(kafka, topic) != first_id
            p = produce(kafka, topic, build_batch([Rec(value=b"again", key=b"k")]))
            assert (p.error_code, p.base_offset, p.log_start_offset) == (NONE, 0, 0)
            assert [r.value for r in read_from(kafka, topic, 0)] == [b"again"]
    finally:
        stop_process(server.proc)


def _topic_id(kafka: RawKafka, topic: str) -> uuid.UUID:
    resp = kafka.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return resp.topics[0].topic_id
