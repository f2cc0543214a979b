"""/metrics: Prometheus text (parsed by prometheus_client's parser) whose counters move
by exactly the records and bytes produced and fetched, plus the scrape-time gauges
(connections, long-poll waiters, high watermarks, committed offsets and lag). Each
test has its own Redis and sidecar, so no other test moves these counters."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import RedisServer, Skiff, start_skiff, stop_process
from rawkafka import RawKafka, build_batch, fetch_request, fetched_records, produce_request
from telemetry_helpers import scrape, value


@pytest.fixture
def storage_format() -> str:
    """The sidecar's --storage-format; tests parametrize it (or `sidecar` indirectly)."""
    return "record"


@pytest.fixture
def sidecar(
    own_redis: RedisServer, tmp_path: Path, storage_format: str, request: pytest.FixtureRequest
) -> Iterator[Skiff]:
    fmt = getattr(request, "param", None) or storage_format
    skiff = start_skiff(
        tmp_path / "skiff.log", "--redis-url", own_redis.url, "--storage-format", fmt
    )
    yield skiff
    stop_process(skiff.proc)


def wait_until(check, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


@pytest.mark.parametrize("storage_format", ["record", "batch"])
def test_counters_move_by_the_records_and_bytes(
    sidecar: Skiff, topic: str, storage_format: str
) -> None:
    before = scrape(sidecar.http_port)
    assert value(before, "skiff_topic_records_in_total", topic=topic) == 0
    batch = build_batch([b"a" * 10, b"b" * 20, b"c" * 30])
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        kafka.request(3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        response = kafka.request(0, 9, produce_request(topic, {0: batch}))
        assert response.responses[0].partition_responses[0].error_code == 0
        fetched = kafka.request(1, 12, fetch_request(topic, {0: 1}))
        records = fetched.responses[0].partitions[0].records
        # A batch topic answers the whole stored batch, as Kafka: offset 0 comes too.
        got = [(r.offset, r.value) for r in fetched_records(records)]
        skipped = [(0, b"a" * 10)] if storage_format == "batch" else []
        assert got == [*skipped, (1, b"b" * 20), (2, b"c" * 30)]
        failed = kafka.request(1, 12, fetch_request(topic, {0: 100}))
        assert failed.responses[0].partitions[0].error_code == 1  # OFFSET_OUT_OF_RANGE

    after = scrape(sidecar.http_port)
    assert value(after, "skiff_topic_records_in_total", topic=topic) == 3
    assert value(after, "skiff_topic_bytes_in_total", topic=topic) == len(batch)
    # records counted per returned batch (Kafka's MessagesOutPerSec counts so too)
    assert value(after, "skiff_topic_records_out_total", topic=topic) == 2 + len(skipped)
    assert value(after, "skiff_topic_bytes_out_total", topic=topic) == len(records)
    assert value(after, "skiff_requests_total", api="produce", version="9") == 1
    assert value(after, "skiff_requests_total", api="fetch", version="12") == 2
    assert value(after, "skiff_requests_total", api="metadata", version="9") == 1
    assert (
        value(
            after,
            "skiff_request_errors_total",
            api="fetch",
            version="12",
            error="OFFSET_OUT_OF_RANGE",
        )
        == 1
    )
    assert value(after, "skiff_request_duration_seconds_count", api="fetch") == 2
    assert value(after, "skiff_request_duration_seconds_bucket", api="fetch", le="+Inf") == 2
    assert value(after, "skiff_redis_round_trip_seconds_count", operation="EVALSHA append") == 1
    assert value(after, "skiff_redis_round_trip_seconds_count", operation="MULTI/EXEC") >= 2
    assert value(after, "skiff_partition_high_watermark", topic=topic, partition="0") == 3
    assert value(after, "skiff_partition_log_start_offset", topic=topic, partition="0") == 0
    assert value(after, "skiff_redis_reachable") == 1
    assert value(after, "skiff_scrape_redis_ok") == 1
    assert value(after, "skiff_scrape_truncated") == 0


@pytest.mark.parametrize("sidecar", ["record", "batch"], indirect=True)
def test_real_clients_move_record_counters_and_lag(sidecar: Skiff, topic: str) -> None:
    producer = Producer({"bootstrap.servers": sidecar.bootstrap, "linger.ms": 20})
    for i in range(10):
        producer.produce(topic, value=b"%03d" % i, partition=0)
    assert producer.flush(30) == 0
    group = f"g-{topic}"
    consumer = Consumer(
        {"bootstrap.servers": sidecar.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    assert got == [b"%03d" % i for i in range(10)]
    consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    consumer.close()

    samples = scrape(sidecar.http_port)
    assert value(samples, "skiff_topic_records_in_total", topic=topic) == 10
    assert value(samples, "skiff_topic_records_out_total", topic=topic) == 10
    assert value(samples, "skiff_partition_high_watermark", topic=topic, partition="0") == 10
    labels = {"group": group, "topic": topic, "partition": "0"}
    assert value(samples, "skiff_group_committed_offset", **labels) == 4
    assert value(samples, "skiff_group_lag", **labels) == 6
    assert value(samples, "skiff_requests_total", api="offset_commit", version="9") >= 1


def test_connections_and_long_poll_waiters(sidecar: Skiff, topic: str) -> None:
    assert value(scrape(sidecar.http_port), "skiff_open_connections") == 0
    with RawKafka("127.0.0.1", sidecar.port) as a, RawKafka("127.0.0.1", sidecar.port) as b:
        b.request(3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        a.send(1, 12, fetch_request(topic, {0: 0}, max_wait_ms=20_000))
        samples = wait_until(
            lambda: (
                (s := scrape(sidecar.http_port)) and value(s, "skiff_longpoll_waiters") == 1 and s
            )
        )
        assert value(samples, "skiff_open_connections") == 2
        assert value(samples, "skiff_longpoll_waiters") == 1
        b.request(0, 9, produce_request(topic, {0: build_batch([b"wake"])}))
        woken = a.recv(1, 12)
        assert [r.value for r in fetched_records(woken.responses[0].partitions[0].records)] == [
            b"wake"
        ]
        assert value(scrape(sidecar.http_port), "skiff_longpoll_waiters") == 0
    assert wait_until(lambda: value(scrape(sidecar.http_port), "skiff_open_connections") == 0)


def test_unsupported_version_is_counted_without_a_label_per_version(sidecar: Skiff) -> None:
    with RawKafka("127.0.0.1", sidecar.port) as kafka:
        header = struct.pack(">hhih", 0, 99, 1, -1)  # Produce v99, no client id
        kafka.send_raw(struct.pack(">i", len(header)) + header)
        assert kafka.closed()
    samples = scrape(sidecar.http_port)
    labels = {"api": "produce", "version": "unsupported"}
    assert value(samples, "skiff_requests_total", **labels) == 1
    assert value(samples, "skiff_request_errors_total", error="CONNECTION_CLOSED", **labels) == 1
