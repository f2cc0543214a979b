"""Long-polling Fetch: max_wait_ms / min_bytes against the session's Skiff, with the
record produced from a second connection while the fetch waits."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Skiff
from rawkafka import (
    RawKafka,
    Rec,
    build_batch,
    fetch_request,
    fetched_records,
    metadata_request,
    produce_request,
)

PRODUCE, FETCH, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 3, 18, 19
NONE = 0
MAX_WAIT_MS = 2000
PRODUCE_AFTER = 0.3


@pytest.fixture
def waiter(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


@pytest.fixture
def producer(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def create(kafka: RawKafka, partitions: int = 1) -> tuple[str, uuid.UUID]:
    topic = f"lp-{uuid.uuid4().hex[:12]}"
    resp = kafka.request(
        CREATE_TOPICS,
        7,
        {
            "topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1}],
            "timeout": 5000,
        },
    )
    [t] = resp.topics
    assert t.error_code == NONE
    return topic, t.topic_id


def produce(kafka: RawKafka, topic: str, value: bytes, partition: int = 0) -> int:
    resp = kafka.request(PRODUCE, 9, produce_request(topic, {partition: build_batch([Rec(value)])}))
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == NONE
    return int(p.base_offset)


def by_partition(resp: Any) -> dict[tuple[str | uuid.UUID, int], Any]:
    out = {}
    for t in resp.responses:
        for p in t.partitions:
            assert p.error_code == NONE, p
            out[(getattr(t, "topic", None) or t.topic_id, p.partition_index)] = p
    return out


@pytest.mark.parametrize("version", [4, 12, 15])
def test_waiting_fetch_returns_as_soon_as_a_record_arrives(
    waiter: RawKafka, producer: RawKafka, version: int
) -> None:
    topic, topic_id = create(producer)
    start = time.monotonic()
    cid = waiter.send(
        FETCH, version, fetch_request(topic, {0: 0}, topic_id, max_wait_ms=MAX_WAIT_MS, min_bytes=1)
    )
    assert not waiter.closed(PRODUCE_AFTER), "the fetch must wait, not return or close"
    assert not waiter._buf, "the fetch answered before anything was produced"
    produced_at = time.monotonic()
    produce(producer, topic, b"wake up")
    resp = waiter.recv(FETCH, version)
    elapsed = time.monotonic() - start
    assert waiter.last_correlation_id == cid
    assert PRODUCE_AFTER <= elapsed < 1.5, elapsed
    assert time.monotonic() - produced_at < 0.5
    [p] = resp.responses[0].partitions
    assert (p.error_code, p.high_watermark) == (NONE, 1)
    assert [(r.offset, r.value) for r in fetched_records(p.records)] == [(0, b"wake up")]


@pytest.mark.parametrize("version", [4, 12, 15])
def test_waiting_fetch_times_out_empty_after_max_wait(
    waiter: RawKafka, producer: RawKafka, version: int
) -> None:
    topic, topic_id = create(producer)
    start = time.monotonic()
    resp = waiter.request(
        FETCH, version, fetch_request(topic, {0: 0}, topic_id, max_wait_ms=MAX_WAIT_MS, min_bytes=1)
    )
    elapsed = time.monotonic() - start
    assert 1.9 <= elapsed < 3.0, elapsed
    [p] = resp.responses[0].partitions
    assert (p.error_code, p.high_watermark) == (NONE, 0)
    assert not fetched_records(p.records)


def test_wait_at_the_end_of_a_non_empty_partition(waiter: RawKafka, producer: RawKafka) -> None:
    topic, _ = create(producer)
    for i in range(3):
        produce(producer, topic, b"old-%d" % i)
    start = time.monotonic()
    waiter.send(FETCH, 12, fetch_request(topic, {0: 3}, max_wait_ms=MAX_WAIT_MS))
    time.sleep(PRODUCE_AFTER)
    produce(producer, topic, b"new")
    resp = waiter.recv(FETCH, 12)
    assert time.monotonic() - start < 1.5
    p = resp.responses[0].partitions[0]
    assert [(r.offset, r.value) for r in fetched_records(p.records)] == [(3, b"new")]


@pytest.mark.parametrize("woken", [0, 2, 3])
def test_fetch_over_several_partitions_wakes_on_any(
    waiter: RawKafka, producer: RawKafka, woken: int
) -> None:
    topic, topic_id = create(producer, partitions=4)
    start = time.monotonic()
    waiter.send(
        FETCH, 15, fetch_request(topic, {p: 0 for p in range(4)}, topic_id, max_wait_ms=MAX_WAIT_MS)
    )
    time.sleep(PRODUCE_AFTER)
    produce(producer, topic, b"on %d" % woken, partition=woken)
    resp = waiter.recv(FETCH, 15)
    assert PRODUCE_AFTER <= time.monotonic() - start < 1.5
    parts = by_partition(resp)
    assert sorted(p for _, p in parts) == [0, 1, 2, 3]
    for (_, index), p in parts.items():
        got = [r.value for r in fetched_records(p.records)]
        assert got == ([b"on %d" % woken] if index == woken else []), index
        assert p.high_watermark == (1 if index == woken else 0)


def test_fetch_over_several_topics_wakes_on_any(waiter: RawKafka, producer: RawKafka) -> None:
    (first, _), (second, _) = create(producer), create(producer)
    request = fetch_request(first, {0: 0}, max_wait_ms=MAX_WAIT_MS)
    request["topics"] += fetch_request(second, {0: 0})["topics"]
    start = time.monotonic()
    waiter.send(FETCH, 12, request)
    time.sleep(PRODUCE_AFTER)
    produce(producer, second, b"second")
    resp = waiter.recv(FETCH, 12)
    assert time.monotonic() - start < 1.5
    parts = by_partition(resp)
    assert fetched_records(parts[(first, 0)].records) == []
    assert [r.value for r in fetched_records(parts[(second, 0)].records)] == [b"second"]


def test_several_waiters_on_one_partition_all_wake(skiff: Skiff, producer: RawKafka) -> None:
    topic, _ = create(producer)
    waiters = [RawKafka("127.0.0.1", skiff.port) for _ in range(5)]
    try:
        start = time.monotonic()
        for w in waiters:
            w.send(FETCH, 12, fetch_request(topic, {0: 0}, max_wait_ms=MAX_WAIT_MS))
        time.sleep(PRODUCE_AFTER)
        produce(producer, topic, b"everyone")
        for w in waiters:
            resp = w.recv(FETCH, 12)
            got = fetched_records(resp.responses[0].partitions[0].records)
            assert [r.value for r in got] == [b"everyone"]
        assert time.monotonic() - start < 1.5
    finally:
        for w in waiters:
            w.close()


def test_min_bytes_keeps_waiting_for_more(waiter: RawKafka, producer: RawKafka) -> None:
    topic, _ = create(producer)
    start = time.monotonic()
    waiter.send(FETCH, 12, fetch_request(topic, {0: 0}, max_wait_ms=MAX_WAIT_MS, min_bytes=3000))
    time.sleep(PRODUCE_AFTER)
    produce(producer, topic, b"a" * 100)  # not enough: keep waiting
    assert not waiter.closed(0.5) and not waiter._buf
    produce(producer, topic, b"b" * 4000)  # enough now
    resp = waiter.recv(FETCH, 12)
    assert time.monotonic() - start < 1.5
    got = fetched_records(resp.responses[0].partitions[0].records)
    assert [len(r.value or b"") for r in got] == [100, 4000]


def test_min_bytes_not_reached_returns_what_there_is_at_max_wait(
    waiter: RawKafka, producer: RawKafka
) -> None:
    topic, _ = create(producer)
    produce(producer, topic, b"small")
    start = time.monotonic()
    resp = waiter.request(
        FETCH, 12, fetch_request(topic, {0: 0}, max_wait_ms=1000, min_bytes=1_000_000)
    )
    assert 0.9 <= time.monotonic() - start < 2.0
    got = fetched_records(resp.responses[0].partitions[0].records)
    assert [r.value for r in got] == [b"small"]


def test_data_already_there_returns_at_once(waiter: RawKafka, producer: RawKafka) -> None:
    topic, _ = create(producer)
    produce(producer, topic, b"ready")
    start = time.monotonic()
    resp = waiter.request(FETCH, 12, fetch_request(topic, {0: 0}, max_wait_ms=5000))
    assert time.monotonic() - start < 0.5
    assert [r.value for r in fetched_records(resp.responses[0].partitions[0].records)] == [b"ready"]


def test_a_waiting_fetch_does_not_block_other_connections(
    waiter: RawKafka, producer: RawKafka
) -> None:
    topic, _ = create(producer)
    waiter.send(FETCH, 12, fetch_request(topic, {0: 0}, max_wait_ms=1000))
    time.sleep(0.1)
    start = time.monotonic()
    for _ in range(5):
        assert (
            producer.request(
                API_VERSIONS,
                3,
                {"client_software_name": "rawkafka", "client_software_version": "1.0"},
            ).error_code
            == NONE
        )
        assert producer.request(METADATA, 12, metadata_request([topic])).topics[0].name == topic
    assert time.monotonic() - start < 0.5
    waiter.recv(FETCH, 12)


def test_waiting_fetch_on_a_closed_connection_is_cleaned_up(
    skiff: Skiff, producer: RawKafka
) -> None:
    topic, _ = create(producer)
    for _ in range(10):
        with RawKafka("127.0.0.1", skiff.port) as gone:
            gone.send(FETCH, 12, fetch_request(topic, {0: 0}, max_wait_ms=MAX_WAIT_MS))
    # The sidecar stays responsive and a later waiter still wakes.
    with RawKafka("127.0.0.1", skiff.port) as waiter:
        start = time.monotonic()
        waiter.send(FETCH, 12, fetch_request(topic, {0: 0}, max_wait_ms=MAX_WAIT_MS))
        time.sleep(PRODUCE_AFTER)
        produce(producer, topic, b"after")
        resp = waiter.recv(FETCH, 12)
        assert time.monotonic() - start < 1.5
        assert fetched_records(resp.responses[0].partitions[0].records)[0].value == b"after"
    assert skiff.alive()
