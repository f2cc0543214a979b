"""Retention: retention.bytes on append, retention.ms by the background sweeper, the log
start moving forward everywhere (Fetch, ListOffsets, Produce, DescribeLogDirs), and
consumers before the log start recovering through auto.offset.reset.

Kafka's rules, with batches for segments: size retention drops the oldest batches while
what remains is still >= retention.bytes; time retention drops the oldest batches whose
largest timestamp is older than now - retention.ms, and when every record is expired the
log start becomes the high watermark. The tests with the `sidecar` fixture run on both
storage formats with the same expected answers (on `batch` topics a batch is one stream
entry of the bytes as produced, so the sizes are the same)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from clients import java_client
from confluent_kafka import Consumer, TopicPartition
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import (
    EARLIEST,
    LATEST,
    MAX_TIMESTAMP,
    NONE,
    OFFSET_OUT_OF_RANGE,
    create,
    fetch,
    list_offset,
    new_topic,
    produce,
    read_from,
    wait_for,
)
from rawkafka import RawKafka, Rec, build_batch

DESCRIBE_LOG_DIRS = 35


@pytest.fixture(params=["record", "batch"])
def storage_format(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sidecar(own_redis: RedisServer, tmp_path: Path, storage_format: str) -> Skiff:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--log-retention-check-interval-ms",
        "200",
        "--storage-format",
        storage_format,
    )
    yield server
    stop_process(server.proc)


def batch_of(first: int, n: int = 10, ts: int | None = None, size: int = 100) -> bytes:
    """n records with values v<first+i> padded to `size` bytes, keys k<first+i>."""
    return build_batch(
        [
            Rec(value=f"v{first + i}".encode().ljust(size, b"."), key=f"k{first + i}".encode())
            for i in range(n)
        ],
        base_timestamp=ts,
    )


def expected_value(offset: int, size: int = 100) -> bytes:
    return f"v{offset}".encode().ljust(size, b".")


def assert_log(kafka: RawKafka, topic: str, lso: int, hw: int) -> None:
    """Exactly the records [lso, hw) are readable, each with its exact bytes; below lso
    Fetch answers OFFSET_OUT_OF_RANGE and ListOffsets earliest is lso."""
    assert list_offset(kafka, topic, EARLIEST)[0] == lso
    assert list_offset(kafka, topic, LATEST)[0] == hw
    recs = read_from(kafka, topic, lso)
    assert [r.offset for r in recs] == list(range(lso, hw))
    assert all(r.value == expected_value(r.offset) for r in recs)  # type: ignore[arg-type]
    assert all(r.key == f"k{r.offset}".encode() for r in recs)
    if lso > 0:
        below = fetch(kafka, topic, lso - 1)
        assert below.error_code == OFFSET_OUT_OF_RANGE
        assert fetch(kafka, topic, 0).error_code == OFFSET_OUT_OF_RANGE


def log_dir_size(kafka: RawKafka, topic: str, version: int = 4) -> int:
    resp = kafka.request(
        DESCRIBE_LOG_DIRS, version, {"topics": [{"topic": topic, "partitions": [0]}]}
    )
    [result] = resp.results
    [entry] = [t for t in result.topics if t.name == topic]
    [p] = entry.partitions
    assert (p.offset_lag, p.is_future_key) == (0, False)
    return int(p.partition_size)


def test_size_retention_trims_on_append(
    sidecar: Skiff, own_redis: RedisServer, storage_format: str
) -> None:
    batch_bytes = len(batch_of(0))
    retention = int(batch_bytes * 3.5)  # 4 whole batches still fit >= retention.bytes
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("size")
        create(kafka, topic, {"retention.bytes": str(retention)})
        sizes = []
        for i in range(20):
            batch = batch_of(10 * i)
            sizes.append(len(batch))
            p = produce(kafka, topic, batch)
            assert (p.error_code, p.base_offset) == (NONE, 10 * i)
            lso = max(0, (i + 1 - 4) * 10)
            assert p.log_start_offset == lso  # the append's own trim is in its answer
            assert_log(kafka, topic, lso, 10 * (i + 1))
        # The size is the batches' bytes as produced (uncompressed v2).
        assert log_dir_size(kafka, topic) == sum(sizes[-4:])
        # Trimmed stream nodes are freed whole: an entry below the log start stays while
        # its node (at most 100 entries, 256 KB: conftest.REDIS_NODE_ARGS) holds a kept one.
        length = own_redis.client().xlen(f"skiff:{{{topic}/0}}:log")
        if storage_format == "batch":  # an entry a batch: all 20 (~23 KB) share one node
            assert length == 20
        else:  # an entry a record: offsets 0-99 fill the first node, freed (lso 160)
            assert length == 100


def test_time_retention_sweeps_expired_batches(sidecar: Skiff) -> None:
    now = int(time.time() * 1000)
    old = now - 600_000
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("time")
        create(kafka, topic, {"retention.ms": "60000"})
        produce(kafka, topic, batch_of(0, ts=old))
        produce(kafka, topic, batch_of(10, ts=old + 1000))
        produce(kafka, topic, batch_of(20, ts=now))  # the first batch to keep
        produce(kafka, topic, batch_of(30, ts=old))  # old, but after a newer batch
        # A producer keeps writing while the sweeper runs.
        hw = 40
        deadline = time.monotonic() + 20
        while list_offset(kafka, topic, EARLIEST)[0] != 20:
            assert time.monotonic() < deadline, "the sweeper did not move the log start"
            assert produce(kafka, topic, batch_of(hw, ts=int(time.time() * 1000))).error_code == 0
            hw += 10
            time.sleep(0.05)
        assert_log(kafka, topic, 20, hw)
        # ListOffsets after trimming: by time from the log start on, max timestamp.
        assert list_offset(kafka, topic, old) == (20, now)
        assert list_offset(kafka, topic, now) == (20, now)
        assert list_offset(kafka, topic, now + 1)[0] == 21
        offset, ts = list_offset(kafka, topic, MAX_TIMESTAMP)
        assert offset >= 20 and ts >= now


def test_every_record_expired_moves_log_start_to_high_watermark(sidecar: Skiff) -> None:
    old = int(time.time() * 1000) - 3_600_000
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("expired")
        create(kafka, topic, {"retention.ms": "1000"})
        for i in range(3):
            produce(kafka, topic, batch_of(10 * i, ts=old + i))
        wait_for(lambda: list_offset(kafka, topic, EARLIEST)[0] == 30, what="lso = hw")
        assert list_offset(kafka, topic, LATEST)[0] == 30
        assert list_offset(kafka, topic, old) == (-1, -1)
        assert fetch(kafka, topic, 29).error_code == OFFSET_OUT_OF_RANGE
        empty = fetch(kafka, topic, 30)
        assert (empty.error_code, empty.log_start_offset, empty.high_watermark) == (NONE, 30, 30)
        assert log_dir_size(kafka, topic) == 0
        # The log goes on at the high watermark.
        p = produce(kafka, topic, batch_of(30))
        assert (p.base_offset, p.log_start_offset) == (30, 30)
        assert_log(kafka, topic, 30, 40)


def test_retention_ms_minus_one_keeps_everything(sidecar: Skiff) -> None:
    old = int(time.time() * 1000) - 3_600_000
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        kept, expiring = new_topic("keep"), new_topic("expire")
        create(kafka, kept, {"retention.ms": "-1"})
        create(kafka, expiring, {"retention.ms": "1000"})
        for topic in (kept, expiring):
            produce(kafka, topic, batch_of(0, ts=old))
        wait_for(lambda: list_offset(kafka, expiring, EARLIEST)[0] == 10, what="sweep")
        time.sleep(0.5)  # two more sweeps
        assert_log(kafka, kept, 0, 10)


def test_consumers_before_log_start_follow_auto_offset_reset(sidecar: Skiff) -> None:
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("reset")
        create(kafka, topic, {"retention.bytes": str(int(len(batch_of(0)) * 2.5))})
        for i in range(6):
            produce(kafka, topic, batch_of(10 * i))
        assert list_offset(kafka, topic, EARLIEST)[0] == 30
    # confluent-kafka: positioned at 0, below the log start.
    for reset, first in (("earliest", 30), ("latest", 60)):
        consumer = Consumer(
            {
                "bootstrap.servers": sidecar.bootstrap,
                "group.id": f"g-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": reset,
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, 0, 0 if reset == "earliest" else 5)])
            if reset == "latest":
                time.sleep(1.0)  # let the reset to the end happen before producing more
                with RawKafka("127.0.0.1", sidecar.port) as kafka:
                    produce(kafka, topic, batch_of(60))
            msg = None
            deadline = time.monotonic() + 30
            while msg is None or msg.error():
                assert time.monotonic() < deadline
                msg = consumer.poll(0.5)
            assert msg.offset() == first
            assert msg.value() == expected_value(first)
        finally:
            consumer.close()
    # The Java client, positioned at 0 with auto.offset.reset=earliest.
    got = java_client.consume(
        sidecar.bootstrap,
        topic,
        0,
        0,
        5,
        properties={"auto.offset.reset": "earliest"},
    )
    lso = 40  # 70 records now, retention keeps 3 batches
    assert [r["offset"] for r in got] == list(range(lso, lso + 5))
    assert [r["value"] for r in got] == [expected_value(o) for o in range(lso, lso + 5)]


def test_server_default_retention_flags(own_redis: RedisServer, tmp_path: Path) -> None:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--log-retention-bytes",
        str(len(batch_of(0)) * 2),
        "--log-retention-ms",
        "-1",
    )
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            topic = new_topic("flags")
            create(kafka, topic)
            for i in range(5):
                produce(kafka, topic, batch_of(10 * i, ts=0))
            assert_log(kafka, topic, 30, 50)
    finally:
        stop_process(server.proc)


def test_max_timestamp_after_retention_removed_it(sidecar: Skiff) -> None:
    """ListOffsets' max timestamp (v7+): after DeleteRecords Kafka still reports the
    record (its segment stays); once retention removed it, the largest one left."""
    now = int(time.time() * 1000)
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        topic = new_topic("maxts")
        create(kafka, topic, {"retention.bytes": str(int(len(batch_of(0)) * 1.5))})
        produce(kafka, topic, batch_of(0, ts=now + 60_000))  # the max, in the future
        assert list_offset(kafka, topic, MAX_TIMESTAMP) == (9, now + 60_009)
        produce(kafka, topic, batch_of(10, ts=now))
        assert list_offset(kafka, topic, EARLIEST)[0] == 0
        produce(kafka, topic, batch_of(20, ts=now + 100))
        assert list_offset(kafka, topic, EARLIEST)[0] == 10  # the max's batch is gone
        assert list_offset(kafka, topic, MAX_TIMESTAMP) == (29, now + 109)
        # By time: the first record at or after the log start with a timestamp >= T.
        assert list_offset(kafka, topic, now + 60_000) == (-1, -1)
        assert list_offset(kafka, topic, now + 5) == (15, now + 5)
