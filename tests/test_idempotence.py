"""Idempotent and transactional producers, raw protocol: resent batches, sequence gaps,
stale epochs and fenced transactional ids, against the append script's producer state.
Each check also reads the log: every record is stored exactly once. Every test runs on
`record` and `batch` topics (skiff.storage.format): on `batch` topics a batch is one
stream entry, so a duplicate must not add one either."""

from __future__ import annotations

import uuid

import pytest
from conftest import RedisServer, Skiff, start_skiff, stop_process
from formats import FORMATS
from log_helpers import create
from rawkafka import RawKafka, build_batch, fetch_request, fetched_records, produce_request

PRODUCE, FETCH, INIT_PRODUCER_ID = 0, 1, 22
NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
PRODUCER_FENCED = 90

pytestmark = pytest.mark.parametrize("fmt", FORMATS)


@pytest.fixture
def kafka(skiff: Skiff) -> RawKafka:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def new_topic(kafka: RawKafka, fmt: str) -> str:
    name = f"idem-{uuid.uuid4().hex[:10]}"
    create(kafka, name, {"skiff.storage.format": fmt})
    return name


def init_producer(kafka: RawKafka, transactional_id: str | None = None, **kw: int) -> tuple:
    body = {
        "transactional_id": transactional_id,
        "transaction_timeout": 60000,
        "producer_id": kw.get("pid", -1),
        "producer_epoch": kw.get("epoch", -1),
    }
    resp = kafka.request(INIT_PRODUCER_ID, 4, body)
    return int(resp.error_code), int(resp.producer_id), int(resp.producer_epoch)


def send(kafka: RawKafka, topic: str, values: list[bytes], pid: int, epoch: int, seq: int):
    batch = build_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    resp = kafka.request(PRODUCE, 9, produce_request(topic, {0: batch}))
    [p] = resp.responses[0].partition_responses
    return int(p.error_code), int(p.base_offset)


def log_values(kafka: RawKafka, topic: str) -> list[bytes | None]:
    resp = kafka.request(FETCH, 12, fetch_request(topic, {0: 0}))
    return [r.value for r in fetched_records(resp.responses[0].partitions[0].records)]


def test_a_resent_batch_returns_its_offset_and_is_stored_once(kafka: RawKafka, fmt: str) -> None:
    topic = new_topic(kafka, fmt)
    _, pid, epoch = init_producer(kafka)
    assert send(kafka, topic, [b"a", b"b"], pid, epoch, 0) == (NONE, 0)
    assert send(kafka, topic, [b"c"], pid, epoch, 2) == (NONE, 2)
    # The producer did not get the answers and resends both (as librdkafka and Java do).
    assert send(kafka, topic, [b"a", b"b"], pid, epoch, 0) == (NONE, 0)
    assert send(kafka, topic, [b"c"], pid, epoch, 2) == (NONE, 2)
    assert log_values(kafka, topic) == [b"a", b"b", b"c"]


def test_a_sequence_gap_is_out_of_order_and_stores_nothing(kafka: RawKafka, fmt: str) -> None:
    topic = new_topic(kafka, fmt)
    _, pid, epoch = init_producer(kafka)
    assert send(kafka, topic, [b"a"], pid, epoch, 0) == (NONE, 0)
    assert send(kafka, topic, [b"c"], pid, epoch, 2)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    # Same first sequence as a stored batch but another range: not a duplicate, a gap.
    assert send(kafka, topic, [b"y", b"z"], pid, epoch, 0)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(kafka, topic, [b"b"], pid, epoch, 1) == (NONE, 1)
    assert log_values(kafka, topic) == [b"a", b"b"]


def test_an_unknown_producer_may_start_at_any_sequence(kafka: RawKafka, fmt: str) -> None:
    """KIP-360: state may have expired; Kafka accepts the first batch it sees."""
    topic = new_topic(kafka, fmt)
    _, pid, epoch = init_producer(kafka)
    assert send(kafka, topic, [b"x"], pid, epoch, 17) == (NONE, 0)
    assert send(kafka, topic, [b"y"], pid, epoch, 18) == (NONE, 1)


def test_a_transactional_id_fences_its_previous_producer(kafka: RawKafka, fmt: str) -> None:
    topic = new_topic(kafka, fmt)
    txn = f"txn-{uuid.uuid4().hex[:8]}"
    assert init_producer(kafka, txn)[0] == NONE
    _, pid, old_epoch = init_producer(kafka, txn)[0:3]
    error, pid2, new_epoch = init_producer(kafka, txn)
    assert (error, pid2, new_epoch) == (NONE, pid, old_epoch + 1)  # same id, next epoch
    assert send(kafka, topic, [b"new"], pid, new_epoch, 0) == (NONE, 0)
    # The fenced producer's batch: its epoch is older than the partition's.
    assert send(kafka, topic, [b"old"], pid, old_epoch, 1)[0] == INVALID_PRODUCER_EPOCH
    # The fenced producer asking to bump its own (stale) epoch is fenced too.
    assert init_producer(kafka, txn, pid=pid, epoch=old_epoch)[0] == PRODUCER_FENCED
    # A new epoch must start at sequence 0.
    error, _, newest = init_producer(kafka, txn, pid=pid, epoch=new_epoch)
    assert error == NONE
    assert send(kafka, topic, [b"gap"], pid, newest, 5)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert send(kafka, topic, [b"next"], pid, newest, 0) == (NONE, 1)
    assert log_values(kafka, topic) == [b"new", b"next"]


def test_producer_state_survives_a_sidecar_restart(
    own_redis: RedisServer, tmp_path: pytest.TempPathFactory, fmt: str
) -> None:
    first = start_skiff(tmp_path / "one.log", "--redis-url", own_redis.url)  # type: ignore[operator]
    with RawKafka("127.0.0.1", first.port) as kafka:
        topic = new_topic(kafka, fmt)
        _, pid, epoch = init_producer(kafka)
        assert send(kafka, topic, [b"a"], pid, epoch, 0) == (NONE, 0)
    stop_process(first.proc)
    second = start_skiff(tmp_path / "two.log", "--redis-url", own_redis.url)  # type: ignore[operator]
    try:
        with RawKafka("127.0.0.1", second.port) as kafka:
            assert send(kafka, topic, [b"a"], pid, epoch, 0) == (NONE, 0)  # a duplicate
            assert send(kafka, topic, [b"c"], pid, epoch, 2)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
            assert log_values(kafka, topic) == [b"a"]
    finally:
        stop_process(second.proc)


def test_producer_state_expires(
    own_redis: RedisServer, tmp_path: pytest.TempPathFactory, fmt: str
) -> None:
    """After producer.id.expiration.ms the producer is unknown: any sequence is taken."""
    import time

    server = start_skiff(
        tmp_path / "skiff.log",  # type: ignore[operator]
        "--redis-url",
        own_redis.url,
        "--producer-id-expiration-ms",
        "300",
    )
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            topic = new_topic(kafka, fmt)
            _, pid, epoch = init_producer(kafka)
            assert send(kafka, topic, [b"a"], pid, epoch, 0) == (NONE, 0)
            assert send(kafka, topic, [b"b"], pid, epoch, 9)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
            time.sleep(0.5)
            assert send(kafka, topic, [b"b"], pid, epoch, 9) == (NONE, 1)
    finally:
        stop_process(server.proc)
