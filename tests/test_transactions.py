"""Kafka transactions (docs/transactions.md) with librdkafka (confluent-kafka) and the raw
protocol: commit and abort, read_committed against read_uncommitted, the last stable
offset, zombie fencing, timeouts, a consume-transform-produce loop with
send_offsets_to_transaction, on both storage formats."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clients import franz_client
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from conftest import RedisServer, Skiff, start_redis, start_skiff, stop_process
from log_helpers import create, delete_records, wait_for
from rawkafka import RawKafka
from redis import asyncio as aioredis
from test_groups_protocol import subscription

from sidecar.storage.txn_store import TxnStore

INIT_PRODUCER_ID, LIST_OFFSETS, FETCH = 22, 2, 1
JOIN_GROUP, SYNC_GROUP, OFFSET_FETCH = 11, 14, 9
ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 25, 26, 28
MEMBER_ID_REQUIRED, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 79, 22, 25
INVALID_TXN_STATE = 48
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, TRANSACTIONAL_ID_NOT_FOUND = 65, 66, 105
INVALID_TRANSACTION_TIMEOUT = 50
LATEST = -1


def _topic(kafka: RawKafka, storage_format: str = "batch", partitions: int = 1) -> str:
    name = f"txn-{uuid.uuid4().hex[:10]}"
    create(kafka, name, {"skiff.storage.format": storage_format}, partitions=partitions)
    return name


@pytest.fixture
def kafka(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def _producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra}
    )
    producer.init_transactions(30)
    return producer


def _consume(
    bootstrap: str, topic: str, isolation: str, until_offset: int | list[int], partitions: int = 1
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record until each partition's position
    reaches until_offset (one per partition, or the same for all; control records
    advance it but are not returned)."""
    ends = until_offset if isinstance(until_offset, list) else [until_offset] * partitions
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(tps)
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                got.append((m.partition(), m.offset(), m.value()))
            positions = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
            if all(max(tp.offset, 0) >= end for tp, end in zip(positions, ends, strict=True)):
                return got
        raise AssertionError(f"{isolation} consumer stuck at {positions}, read {got}")
    finally:
        consumer.close()


def _latest(kafka: RawKafka, topic: str, isolation_level: int, partition: int = 0) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "timestamp": LATEST}]}
        ],
    }
    [p] = kafka.request(LIST_OFFSETS, 7, body).topics[0].partitions
    assert p.error_code == 0, p
    return int(p.offset)


def _fetch_committed(kafka: RawKafka, topic: str, offset: int) -> Any:
    """A read_committed Fetch v12 of partition 0 from offset."""
    body = {
        "replica_id": -1,
        "max_wait": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                ],
            }
        ],
        "forgotten_topics_data": [],
    }
    return kafka.request(FETCH, 12, body).responses[0].partitions[0]


@pytest.mark.parametrize("storage_format", ["batch", "record"])
def test_commit_and_abort_as_read_committed_and_uncommitted_consumers_see_them(
    skiff: Skiff, kafka: RawKafka, storage_format: str, redis_server: RedisServer
) -> None:
    bootstrap = f"127.0.0.1:{skiff.port}"
    topic = _topic(kafka, storage_format)
    producer = _producer(bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, b"c%d" % i)
    producer.commit_transaction(30)  # offsets 0-2, COMMIT marker at 3
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic, b"a%d" % i)
    producer.flush(30)
    producer.abort_transaction(30)  # offsets 4-5, ABORT marker at 6
    producer.begin_transaction()
    producer.produce(topic, b"c3")
    producer.commit_transaction(30)  # offset 7, COMMIT marker at 8

    assert _latest(kafka, topic, 0) == 9
    assert _latest(kafka, topic, 1) == 9
    committed = _consume(bootstrap, topic, "read_committed", 9)
    assert committed == [(0, 0, b"c0"), (0, 1, b"c1"), (0, 2, b"c2"), (0, 7, b"c3")]
    everything = _consume(bootstrap, topic, "read_uncommitted", 9)
    assert [(o, v) for _, o, v in everything] == [
        (0, b"c0"),
        (1, b"c1"),
        (2, b"c2"),
        (4, b"a0"),
        (5, b"a1"),
        (7, b"c3"),
    ]
    # The aborted transaction, as Kafka lists it for a read_committed fetch from before it.
    p = _fetch_committed(kafka, topic, 3)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [
        (_producer_id(kafka, f"tx-{topic}"), 4)
    ]
    assert p.last_stable_offset == 9
    # From after the ABORT marker there is nothing to skip.
    assert _fetch_committed(kafka, topic, 7).aborted_transactions == ()

    # The log start moving past the ABORT marker frees its index entry (Kafka deletes a
    # segment's transaction index with it); inside the transaction it is still needed.
    aborted_index = f"skiff:{{{topic}/0}}:aborted"
    assert delete_records(kafka, topic, {0: 5}) == {0: (0, 5)}
    assert redis_server.client().zcard(aborted_index) == 1
    assert [a.first_offset for a in _fetch_committed(kafka, topic, 5).aborted_transactions] == [4]
    assert delete_records(kafka, topic, {0: 7}) == {0: (0, 7)}
    assert redis_server.client().zcard(aborted_index) == 0
    after = _fetch_committed(kafka, topic, 7)
    assert (after.error_code, after.log_start_offset, after.aborted_transactions) == (0, 7, ())
    assert after.records  # c3 and its COMMIT marker


@pytest.mark.parametrize("storage_format", ["batch", "record"])
def test_the_spark_redis_read_path_skips_markers(
    skiff: Skiff, kafka: RawKafka, redis_server: RedisServer, storage_format: str
) -> None:
    """pipeline/skiff_logs.py reads the log straight from Redis, as Spark's Kafka source
    does by default (read_uncommitted): every data record, no transaction marker."""
    pytest.importorskip("pyarrow")
    from pipeline.skiff_logs import RedisLog

    bootstrap = f"127.0.0.1:{skiff.port}"
    topic = _topic(kafka, storage_format)
    producer = _producer(bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    producer.produce(topic, b"c0", b"k")
    producer.commit_transaction(30)  # 0, COMMIT marker at 1
    producer.begin_transaction()
    producer.produce(topic, b"a0", b"k")
    producer.flush(30)
    producer.abort_transaction(30)  # 2, ABORT marker at 3
    log = RedisLog(redis_server.url)
    try:
        assert log.watermarks(topic, 0) == (0, 4)
        rows = [row for batch in log.read(topic, 0, 0, 4) for row in batch.to_pylist()]
    finally:
        log.close()
    assert [(r["offset"], r["key"], r["value"]) for r in rows] == [
        (0, b"k", b"c0"),
        (2, b"k", b"a0"),
    ]


def _producer_id(kafka: RawKafka, txn_id: str) -> int:
    """The producer id a transactional id holds (an init bumps only its epoch)."""
    body = {
        "transactional_id": txn_id,
        "transaction_timeout": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    resp = kafka.request(INIT_PRODUCER_ID, 4, body)
    assert resp.error_code == 0, resp
    return int(resp.producer_id)


@pytest.mark.parametrize("storage_format", ["batch", "record"])
def test_an_open_transaction_holds_back_read_committed_readers(
    skiff: Skiff, kafka: RawKafka, storage_format: str
) -> None:
    bootstrap = f"127.0.0.1:{skiff.port}"
    topic = _topic(kafka, storage_format)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, b"before")
    plain.flush(30)
    producer = _producer(bootstrap, f"tx-{topic}")
    producer.begin_transaction()
    producer.produce(topic, b"t0")
    producer.produce(topic, b"t1")
    producer.flush(30)  # offsets 1-2, transaction open
    plain.produce(topic, b"after")
    plain.flush(30)  # offset 3

    # The last stable offset is the open transaction's first offset.
    assert _latest(kafka, topic, 0) == 4
    assert _latest(kafka, topic, 1) == 1
    p = _fetch_committed(kafka, topic, 0)
    assert (p.high_watermark, p.last_stable_offset) == (4, 1)
    assert _consume(bootstrap, topic, "read_committed", 1) == [(0, 0, b"before")]
    p = _fetch_committed(kafka, topic, 1)
    assert p.records in (None, b"")  # nothing at or past the last stable offset

    producer.commit_transaction(30)  # marker at 4
    assert _latest(kafka, topic, 1) == 5
    got = _consume(bootstrap, topic, "read_committed", 5)
    assert got == [(0, 0, b"before"), (0, 1, b"t0"), (0, 2, b"t1"), (0, 3, b"after")]


@pytest.mark.parametrize("storage_format", ["batch", "record"])
def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(
    skiff: Skiff, kafka: RawKafka, storage_format: str
) -> None:
    bootstrap = f"127.0.0.1:{skiff.port}"
    topic = _topic(kafka, storage_format)
    txn_id = f"tx-{topic}"
    zombie = _producer(bootstrap, txn_id)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie")
    zombie.flush(30)  # offset 0, open

    fresh = _producer(bootstrap, txn_id)  # aborts the zombie's transaction: marker at 1
    fresh.begin_transaction()
    fresh.produce(topic, b"fresh")
    fresh.commit_transaction(30)  # offset 2, marker at 3

    with pytest.raises(KafkaException) as failed:
        zombie.produce(topic, b"late")
        zombie.commit_transaction(30)
    assert failed.value.args[0].code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )
    assert _consume(bootstrap, topic, "read_committed", 4) == [(0, 2, b"fresh")]
    uncommitted = _consume(bootstrap, topic, "read_uncommitted", 4)
    assert [v for _, _, v in uncommitted] == [b"zombie", b"fresh"]


def test_transaction_timeout_above_the_maximum_is_refused(kafka: RawKafka) -> None:
    body = {
        "transactional_id": f"tx-{uuid.uuid4().hex[:8]}",
        "transaction_timeout": 900_001,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    resp = kafka.request(INIT_PRODUCER_ID, 4, body)
    assert (resp.error_code, resp.producer_id) == (INVALID_TRANSACTION_TIMEOUT, -1)


@pytest.mark.parametrize("storage_format", ["batch", "record"])
def test_consume_transform_produce_commits_offsets_with_the_output(
    skiff: Skiff, kafka: RawKafka, storage_format: str
) -> None:
    bootstrap = f"127.0.0.1:{skiff.port}"
    source, sink = _topic(kafka, storage_format), _topic(kafka, storage_format)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        plain.produce(source, b"%d" % i)
    plain.flush(30)
    group = f"g-{source}"

    def consumer() -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        c.subscribe([source])
        return c

    producer = _producer(bootstrap, f"tx-{source}")

    def one_round(c: Consumer, commit: bool) -> list[bytes]:
        batch = wait_for(lambda: c.consume(5, 1.0), what="input records")
        producer.begin_transaction()
        for m in batch:
            producer.produce(sink, m.value() + b"!")
        positions = c.position(c.assignment())
        producer.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        return [m.value() for m in batch]

    c = consumer()
    first = one_round(c, commit=True)
    one_round(c, commit=False)  # its output and its offsets are dropped
    c.close()

    # A restarted consumer resumes at the committed offsets: after the first round.
    c = consumer()
    rest: list[bytes] = []
    while len(first) + len(rest) < 10:
        rest += one_round(c, commit=True)
    c.close()
    assert first + rest == [b"%d" % i for i in range(10)]

    got = _consume(bootstrap, sink, "read_committed", _latest(kafka, sink, 1))
    assert [v for _, _, v in got] == [b"%d!" % i for i in range(10)]
    admin_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    [tp] = admin_consumer.committed([TopicPartition(source, 0)], 30)
    admin_consumer.close()
    assert tp.offset == 10


def _join_alone(kafka: RawKafka, group: str, topic: str) -> tuple[str, int]:
    """A classic group of one member (JoinGroup v9 twice, SyncGroup as leader): its
    member id and generation."""
    body = {
        "group_id": group,
        "session_timeout": 30_000,
        "rebalance_timeout": 10_000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription(topic)}],
        "reason": None,
    }
    first = kafka.request(JOIN_GROUP, 9, body)
    assert first.error_code == MEMBER_ID_REQUIRED, first
    joined = kafka.request(JOIN_GROUP, 9, {**body, "member_id": first.member_id})
    assert joined.error_code == 0, joined
    synced = kafka.request(
        SYNC_GROUP,
        5,
        {
            "group_id": group,
            "generation_id": joined.generation_id,
            "member_id": joined.member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": joined.member_id, "assignment": b""}],
        },
    )
    assert synced.error_code == 0, synced
    return joined.member_id, joined.generation_id


def test_txn_offset_commit_fences_members_of_other_generations(
    skiff: Skiff, kafka: RawKafka
) -> None:
    """KIP-447: TxnOffsetCommit v3+ carries the consumer's member id and generation; a
    zombie's (an older generation, a member the group no longer has) is refused, as by
    Kafka's group coordinator, and only the current member's offsets commit."""
    topic = _topic(kafka)
    group, txn_id = f"g-{topic}", f"tx-{topic}"
    member, generation = _join_alone(kafka, group, topic)
    init = {"transactional_id": txn_id, "transaction_timeout": 60000}
    resp = kafka.request(INIT_PRODUCER_ID, 4, {**init, "producer_id": -1, "producer_epoch": -1})
    pid, epoch = resp.producer_id, resp.producer_epoch
    ids = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch}
    assert kafka.request(ADD_OFFSETS_TO_TXN, 3, {**ids, "group_id": group}).error_code == 0

    def commit(offset: int, generation_id: int, member_id: str, group_id: str = group) -> int:
        resp = kafka.request(
            TXN_OFFSET_COMMIT,
            3,
            {
                **ids,
                "group_id": group_id,
                "generation_id": generation_id,
                "member_id": member_id,
                "group_instance_id": None,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": offset,
                                "committed_leader_epoch": -1,
                                "committed_metadata": None,
                            }
                        ],
                    }
                ],
            },
        )
        return int(resp.topics[0].partitions[0].error_code)

    assert commit(5, generation - 1, member) == ILLEGAL_GENERATION
    assert commit(5, generation + 1, member) == ILLEGAL_GENERATION
    assert commit(5, generation, "zombie-member") == UNKNOWN_MEMBER_ID
    # A group the transaction did not add: refused before any member check (Kafka 4.x).
    assert commit(5, 3, "", f"no-such-{group}") == INVALID_TXN_STATE
    # No member fields (a producer given only the group id): accepted, as by Kafka.
    assert commit(6, -1, "") == 0
    assert commit(7, generation, member) == 0
    assert kafka.request(END_TXN, 3, {**ids, "committed": True}).error_code == 0
    fetched = kafka.request(
        OFFSET_FETCH,
        7,
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
         "require_stable": True},
    )  # fmt: skip
    assert fetched.topics[0].partitions[0].committed_offset == 7


@pytest.fixture
def quick_timeouts(own_redis: RedisServer, tmp_path: Path) -> Iterator[Skiff]:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "100",
        "--transactional-id-expiration-ms",
        "3000",
    )
    yield server
    stop_process(server.proc)


def test_an_idle_transactional_id_expires(quick_timeouts: Skiff) -> None:
    """transactional.id.expiration.ms after its last transaction an id is gone, as in
    Kafka: DescribeTransactions answers TRANSACTIONAL_ID_NOT_FOUND, ListTransactions
    leaves it out, and a new InitProducerId starts it afresh at epoch 0."""
    bootstrap = f"127.0.0.1:{quick_timeouts.port}"
    with RawKafka("127.0.0.1", quick_timeouts.port) as kafka:
        topic = _topic(kafka)
        txn_id = f"tx-{topic}"
        producer = _producer(bootstrap, txn_id)
        producer.begin_transaction()
        producer.produce(topic, b"one")
        producer.commit_transaction(30)

        def described() -> int:
            resp = kafka.request(DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id]})
            return int(resp.transaction_states[0].error_code)

        def listed() -> list[str]:
            resp = kafka.request(
                LIST_TRANSACTIONS, 0, {"state_filters": [], "producer_id_filters": []}
            )
            return [t.transactional_id for t in resp.transaction_states]

        assert described() == 0 and txn_id in listed()
        wait_for(lambda: described() == TRANSACTIONAL_ID_NOT_FOUND, what="the id's expiry")
        assert txn_id not in listed()
        init = {"transactional_id": txn_id, "transaction_timeout": 60000}
        resp = kafka.request(INIT_PRODUCER_ID, 4, {**init, "producer_id": -1, "producer_epoch": -1})
        assert (resp.error_code, resp.producer_epoch) == (0, 0)


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(
    quick_timeouts: Skiff,
) -> None:
    bootstrap = f"127.0.0.1:{quick_timeouts.port}"
    with RawKafka("127.0.0.1", quick_timeouts.port) as kafka:
        topic = _topic(kafka)
        producer = _producer(bootstrap, f"tx-{topic}", **{"transaction.timeout.ms": 1000})
        producer.begin_transaction()
        producer.produce(topic, b"slow")
        producer.flush(30)
        assert _latest(kafka, topic, 1) == 0
        # The coordinator aborts it: the ABORT marker (offset 1) frees the stable offset.
        wait_for(lambda: _latest(kafka, topic, 1) == 2, what="the timed-out abort")
    with pytest.raises(KafkaException):
        producer.commit_transaction(30)
    assert _consume(bootstrap, topic, "read_committed", 2) == []
    assert [v for _, _, v in _consume(bootstrap, topic, "read_uncommitted", 2)] == [b"slow"]


@pytest.fixture
def compacting(own_redis: RedisServer, tmp_path: Path) -> Iterator[Skiff]:
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", own_redis.url, "--log-cleaner-backoff-ms", "100"
    )
    yield server
    stop_process(server.proc)


def _compacted_topic(kafka: RawKafka, storage_format: str, **configs: str) -> str:
    """A compacted topic that every new record makes due for a pass."""
    topic = f"txn-{uuid.uuid4().hex[:10]}"
    wanted = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
    create(kafka, topic, {**wanted, **configs, "skiff.storage.format": storage_format})
    return topic


def _transactions(producer: Producer, topic: str, steps: list[tuple[bytes, bytes, bool]]) -> None:
    """One transaction a (key, value, commit?) step."""
    for key, value, commit in steps:
        producer.begin_transaction()
        producer.produce(topic, value, key)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


@pytest.mark.parametrize("storage_format", ["batch", "record"])
def test_compaction_drops_aborted_batches_keeps_markers_and_stops_at_the_stable_offset(
    compacting: Skiff, own_redis: RedisServer, storage_format: str
) -> None:
    """As Kafka's cleaner: aborted transactions' records are removed and never make a
    key's committed record look superseded; markers stay; nothing at or past the last
    stable offset is cleaned."""
    bootstrap = f"127.0.0.1:{compacting.port}"
    with RawKafka("127.0.0.1", compacting.port) as kafka:
        topic = _compacted_topic(kafka, storage_format)
        producer = _producer(bootstrap, f"tx-{topic}")
        steps = [
            (b"k1", b"v1", True),  # 0, marker 1
            (b"k2", b"v1", True),  # 2, marker 3
            (b"k1", b"x", False),  # 4, ABORT marker 5
            (b"k1", b"v2", True),  # 6, marker 7
            (b"k2", b"y", False),  # 8, ABORT marker 9: k2's v1 at 2 is still its value
        ]
        _transactions(producer, topic, steps)
        producer.begin_transaction()
        producer.produce(topic, b"v2", b"k2")  # 10, open: the last stable offset
        producer.flush(30)
        meta = f"skiff:{{{topic}/0}}:meta"
        wait_for(
            lambda: int(own_redis.client().hget(meta, "cleaned") or 0) == 10,
            what="a compaction pass up to the last stable offset",
        )
        # k1's older values and both aborted records went; k2 at 2 stays, as its later
        # write aborted and the open transaction's may abort too.
        want = [(0, 2, b"v1"), (0, 6, b"v2")]
        assert _consume(bootstrap, topic, "read_committed", 10) == want
        assert _consume(bootstrap, topic, "read_uncommitted", 10) == [*want, (0, 10, b"v2")]
        # 2 records, the 5 markers (1, 3, 5, 7, 9) and the open transaction's batch.
        assert own_redis.client().xlen(f"skiff:{{{topic}/0}}:log") == 8
        producer.commit_transaction(30)  # marker 11
        committed = _consume(bootstrap, topic, "read_committed", 12)
        assert committed[-1] == (0, 10, b"v2")


@pytest.mark.parametrize("storage_format", ["batch", "record"])
def test_compaction_removes_markers_whose_transactions_left_no_record(
    compacting: Skiff, own_redis: RedisServer, storage_format: str
) -> None:
    """As Kafka's cleaner: a marker goes once no record of its transaction is left (all
    compacted away, or aborted and removed by an earlier pass) and it is older than
    delete.retention.ms; an ABORT marker takes its aborted-index entry along. Markers of
    transactions with records left stay. Without this a compacted topic written in
    transactions (a Kafka Streams changelog under exactly-once) grew a marker a commit."""
    bootstrap = f"127.0.0.1:{compacting.port}"
    with RawKafka("127.0.0.1", compacting.port) as kafka:
        topic = _compacted_topic(kafka, storage_format, **{"delete.retention.ms": "0"})
        producer = _producer(bootstrap, f"tx-{topic}")
        steps = [
            (b"k1", b"v1", True),  # 0, marker 1: k1 is written again
            (b"k1", b"x", False),  # 2, ABORT marker 3
            (b"k1", b"v2", True),  # 4, marker 5: k1 is written again
            (b"k2", b"v1", True),  # 6, marker 7 stays: k2's value
            (b"k1", b"v3", True),  # 8, marker 9 stays: k1's value
        ]
        _transactions(producer, topic, steps)
        client = own_redis.client()
        meta, log = f"skiff:{{{topic}/0}}:meta", f"skiff:{{{topic}/0}}:log"
        aborted = f"skiff:{{{topic}/0}}:aborted"
        wait_for(lambda: int(client.hget(meta, "cleaned") or 0) == 10, what="a first pass")
        # The first pass removed the records (0, 2, 4); their markers go in the next one,
        # which a new record makes due.
        plain = Producer({"bootstrap.servers": bootstrap})
        plain.produce(topic, b"z", b"k3")  # 10
        assert plain.flush(30) == 0
        wait_for(lambda: client.xlen(log) == 5, what="the markers of 0, 2 and 4 removed")
        assert client.zcard(aborted) == 0
        want = [(0, 6, b"v1"), (0, 8, b"v3"), (0, 10, b"z")]
        assert _consume(bootstrap, topic, "read_committed", 11) == want
        assert _consume(bootstrap, topic, "read_uncommitted", 11) == want
        # The producer's next transaction is read as committed: no stale abort hides it.
        producer.begin_transaction()
        producer.produce(topic, b"v4", b"k1")  # 11, marker 12
        producer.flush(30)
        producer.commit_transaction(30)
        assert _consume(bootstrap, topic, "read_committed", 13)[-1] == (0, 11, b"v4")


def test_franz_go_group_transact_session_is_exactly_once(skiff: Skiff, kafka: RawKafka) -> None:
    bootstrap = f"127.0.0.1:{skiff.port}"
    source, sink = _topic(kafka, partitions=2), _topic(kafka, partitions=2)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(100):
        plain.produce(source, b"%d" % i, partition=i % 2)
    plain.flush(30)
    group = f"g-{source}"
    done = subprocess.run(
        [
            str(franz_client.build_tool()),
            "transact",
            "--bootstrap",
            bootstrap,
            "--source",
            source,
            "--sink",
            sink,
            "--group",
            group,
            "--txn-id",
            f"tx-{source}",
            "--count",
            "100",
            "--abort-every",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["committed"] == 100 and summary["aborted_rounds"] >= 1
    ends = [_latest(kafka, sink, 1, p) for p in range(2)]
    got = _consume(bootstrap, sink, "read_committed", ends, partitions=2)
    assert sorted(v for _, _, v in got) == sorted(b"%d!" % i for i in range(100))
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = check.committed([TopicPartition(source, p) for p in range(2)], 30)
    check.close()
    assert [tp.offset for tp in committed] == [50, 50]


def test_a_commit_cut_short_by_a_redis_restart_completes_on_the_retry(tmp_path: Path) -> None:
    """A sidecar decided a commit and wrote one of its two markers, then Redis restarted
    (AOF): the producer's retried EndTxn finds the transaction decided, writes the missing
    marker only, and read_committed readers see every record once."""
    redis_dir = tmp_path / "redis"
    server = start_redis(redis_dir, aof=True)
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", server.url)
    try:
        bootstrap = skiff.bootstrap
        with RawKafka("127.0.0.1", skiff.port) as kafka:
            topic = _topic(kafka, partitions=2)
        txn_id = f"tx-{topic}"
        producer = _producer(bootstrap, txn_id)
        producer.begin_transaction()
        for p in (0, 1):
            producer.produce(topic, b"v%d" % p, partition=p)
        producer.flush(30)  # offset 0 on each partition, open

        async def decide_and_mark_one() -> None:
            client = aioredis.Redis(port=server.port)
            try:
                txns = TxnStore(client, 604_800_000)
                decided = await txns.end(txn_id, *_producer_of(server, txn_id), True)
                assert decided is not None
                assert sorted(decided.partitions) == [(topic, 0), (topic, 1)]
                identity = json.loads(await client.get("skiff:identity"))["cluster_id"]
                assert await txns.write_marker(topic, 0, decided, identity, True) == 1
            finally:
                await client.aclose()

        asyncio.run(decide_and_mark_one())
        server.client().execute_command("BGREWRITEAOF")
        time.sleep(0.5)
        stop_process(server.proc)
        server = start_redis(redis_dir, port=server.port, aof=True)

        producer.commit_transaction(60)
        hw = server.client()
        assert [int(hw.hget(f"skiff:{{{topic}/{p}}}:meta", "hw")) for p in (0, 1)] == [2, 2]
        got = _consume(bootstrap, topic, "read_committed", 2, partitions=2)
        assert sorted(got) == [(0, 0, b"v0"), (1, 0, b"v1")]
    finally:
        stop_process(skiff.proc)
        stop_process(server.proc)


def _producer_of(server: RedisServer, txn_id: str) -> tuple[int, int]:
    pid, epoch = server.client().hmget(f"skiff:{{txn/{txn_id}}}:producer", "pid", "epoch")
    return int(pid), int(epoch)
