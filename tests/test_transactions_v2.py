"""Transaction protocol version 2 (KIP-890 part 2, docs/transactions.md) over the raw
protocol: the feature in ApiVersions, partitions added by Produce v12 and groups by
TxnOffsetCommit v5, the epoch bump of every EndTxn v5 and its retries, an empty abort,
the producer id moving on when the epoch runs out, and a transaction the coordinator
aborted. Kafka 4.x's Java client and Kafka Streams run it in test_transactions_java.py."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import create, wait_for
from rawkafka import RawKafka, build_batch, fetch_request, produce_request, read_batches
from telemetry_helpers import scrape

API_VERSIONS, PRODUCE, FETCH, OFFSET_FETCH = 18, 0, 1, 9
INIT_PRODUCER_ID, END_TXN, TXN_OFFSET_COMMIT, DESCRIBE_PRODUCERS = 22, 26, 28, 61
NONE, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED = 0, 47, 48, 90
ILLEGAL_GENERATION, GROUP_ID_NOT_FOUND, UNKNOWN_TOPIC_ID = 22, 69, 100
STALE_MEMBER_EPOCH, CG_HEARTBEAT = 113, 68
CONTROL_BIT = 0x20


@pytest.fixture
def kafka(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def _init(kafka: RawKafka, txn_id: str, timeout_ms: int = 60_000) -> tuple[int, int]:
    body = {
        "transactional_id": txn_id,
        "transaction_timeout": timeout_ms,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    resp = kafka.request(INIT_PRODUCER_ID, 4, body)
    assert resp.error_code == NONE, resp
    return int(resp.producer_id), int(resp.producer_epoch)


def _produce(
    kafka: RawKafka, txn_id: str, topic: str, pid: int, epoch: int, seq: int, values: list[bytes]
) -> Any:
    batch = build_batch(
        values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True
    )
    body = produce_request(topic, {0: batch}) | {"transactional_id": txn_id}
    return kafka.request(PRODUCE, 12, body).responses[0].partition_responses[0]


def _end(kafka: RawKafka, txn_id: str, pid: int, epoch: int, commit: bool) -> Any:
    body = {
        "transactional_id": txn_id,
        "producer_id": pid,
        "producer_epoch": epoch,
        "committed": commit,
    }
    return kafka.request(END_TXN, 5, body)


def stored_batches(kafka: RawKafka, topic: str) -> list[tuple[int, bool, int, list[bytes | None]]]:
    """(base offset, control, producer epoch, values) of partition 0's batches, as a
    read_uncommitted Fetch v12 returns them; a marker's "value" is its record's key
    (version 0, type: 0 ABORT, 1 COMMIT)."""
    body = fetch_request(topic, {0: 0}) | {"isolation_level": 0}
    data = kafka.request(FETCH, 12, body).responses[0].partitions[0].records
    out = []
    pos = 0
    for batch in read_batches(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        raw = data[pos : pos + 12 + length]
        epoch = int.from_bytes(raw[51:53], "big", signed=True)
        control = bool(raw[22] & CONTROL_BIT)
        values = [r.key if control else r.value for r in batch.records]
        out.append((batch.base_offset, control, epoch, values))
        pos += 12 + length
    return out


def test_api_versions_finalizes_transaction_version_2(kafka: RawKafka) -> None:
    resp = kafka.request(
        API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"}
    )
    assert [(f.name, f.min_version, f.max_version) for f in resp.supported_features] == [
        ("transaction.version", 0, 2)
    ]
    assert resp.finalized_features_epoch >= 0
    assert [
        (f.name, f.min_version_level, f.max_version_level) for f in resp.finalized_features
    ] == [("transaction.version", 2, 2)]
    versions = {k.api_key: k.max_version for k in resp.api_keys}
    # What a client needs to use it (franz-go checks these).
    assert versions[PRODUCE] >= 12 and versions[END_TXN] >= 5 and versions[TXN_OFFSET_COMMIT] >= 5
    # As Kafka (KAFKA-17492): v3 leaves out features whose minimum level is 0.
    v3 = kafka.request(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    assert v3.supported_features == ()
    assert [f.name for f in v3.finalized_features] == ["transaction.version"]


def test_produce_adds_partitions_and_end_txn_bumps_the_epoch(kafka: RawKafka) -> None:
    topic = f"tv2-{uuid.uuid4().hex[:10]}"
    create(kafka, topic)
    txn_id = f"tx-{topic}"
    pid, epoch = _init(kafka, txn_id)

    # No AddPartitionsToTxn: Produce v12 opens the transaction and adds the partition.
    assert _produce(kafka, txn_id, topic, pid, epoch, 0, [b"a", b"b"]).error_code == NONE
    ended = _end(kafka, txn_id, pid, epoch, commit=True)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (NONE, pid, epoch + 1)
    # A retry of that EndTxn (its answer lost) gets the same answer; the other
    # decision is refused; the old epoch may not produce any more.
    again = _end(kafka, txn_id, pid, epoch, commit=True)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, pid, epoch + 1)
    assert _end(kafka, txn_id, pid, epoch, commit=False).error_code == INVALID_TXN_STATE
    late = _produce(kafka, txn_id, topic, pid, epoch, 2, [b"late"])
    assert late.error_code == INVALID_PRODUCER_EPOCH

    # The next transaction runs at the new epoch, its sequences from 0; it aborts.
    epoch += 1
    assert _produce(kafka, txn_id, topic, pid, epoch, 0, [b"x"]).error_code == NONE
    ended = _end(kafka, txn_id, pid, epoch, commit=False)
    assert (ended.error_code, ended.producer_epoch) == (NONE, epoch + 1)
    # An abort with nothing open only moves the epoch on; a commit is refused.
    epoch += 1
    assert _end(kafka, txn_id, pid, epoch, commit=True).error_code == INVALID_TXN_STATE
    empty = _end(kafka, txn_id, pid, epoch, commit=False)
    assert (empty.error_code, empty.producer_id, empty.producer_epoch) == (NONE, pid, epoch + 1)

    # Markers carry the bumped epoch, as Kafka's coordinator writes them.
    assert stored_batches(kafka, topic) == [
        (0, False, epoch - 2, [b"a", b"b"]),
        (2, True, epoch - 1, [b"\x00\x00\x00\x01"]),
        (3, False, epoch - 1, [b"x"]),
        (4, True, epoch, [b"\x00\x00\x00\x00"]),
    ]


def _txn_commit_body(
    txn_id: str,
    group: str,
    pid: int,
    epoch: int,
    topics: list[dict[str, Any]],
    offset: int,
    metadata: str = "",
) -> dict[str, Any]:
    """TxnOffsetCommit of `offset` for partition 0 of each topic (by name or id)."""
    partition = {
        "partition_index": 0,
        "committed_offset": offset,
        "committed_leader_epoch": -1,
        "committed_metadata": metadata,
    }
    return {
        "transactional_id": txn_id,
        "group_id": group,
        "producer_id": pid,
        "producer_epoch": epoch,
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [{**ref, "partitions": [partition]} for ref in topics],
    }


def test_txn_offset_commit_v5_adds_the_group(kafka: RawKafka) -> None:
    topic = f"tv2-{uuid.uuid4().hex[:10]}"
    create(kafka, topic)
    txn_id, group = f"tx-{topic}", f"g-{topic}"
    pid, epoch = _init(kafka, txn_id)
    body = _txn_commit_body(txn_id, group, pid, epoch, [{"name": topic}], 7)
    [p] = kafka.request(TXN_OFFSET_COMMIT, 5, body).topics[0].partitions
    assert p.error_code == NONE
    # Before AddOffsetsToTxn existed as a step, v4 still needs it.
    [p4] = (
        kafka.request(TXN_OFFSET_COMMIT, 4, body | {"group_id": group + "-v4"}).topics[0].partitions
    )
    assert p4.error_code == INVALID_TXN_STATE

    def committed() -> int:
        req = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
        resp = kafka.request(OFFSET_FETCH, 7, req | {"require_stable": False})
        return int(resp.topics[0].partitions[0].committed_offset)

    meta = {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False}
    topic_id = kafka.request(3, 12, meta).topics[0].topic_id

    def stable(version: int) -> tuple[int, int]:
        """OffsetFetch with require_stable (v10: the topic by id): (offset, error)."""
        wanted = [{"name": topic, "topic_id": topic_id, "partition_indexes": [0]}]
        body = {"groups": [{"group_id": group, "topics": wanted}], "require_stable": True}
        [p] = kafka.request(OFFSET_FETCH, version, body).groups[0].topics[0].partitions
        return int(p.committed_offset), int(p.error_code)

    assert committed() == -1  # not before the commit
    # The pending offset holds the partition: UNSTABLE_OFFSET_COMMIT (88), as Kafka's.
    assert [stable(v) for v in (9, 10)] == [(-1, 88), (-1, 88)]
    assert _end(kafka, txn_id, pid, epoch, commit=True).error_code == NONE
    assert committed() == 7
    assert [stable(v) for v in (9, 10)] == [(7, NONE), (7, NONE)]


def test_txn_offset_commit_v6_names_topics_by_id(kafka: RawKafka) -> None:
    """KIP-1319 (Kafka 4.4): topics by id, UNKNOWN_TOPIC_ID for an id no topic has, and
    GROUP_ID_NOT_FOUND for a member's commit to a group that does not exist, where v5
    answers ILLEGAL_GENERATION."""
    topic = f"tv6-{uuid.uuid4().hex[:10]}"
    create(kafka, topic)
    meta = {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False}
    topic_id = kafka.request(3, 12, meta).topics[0].topic_id
    unknown_id = uuid.uuid4()
    txn_id, group = f"tx-{topic}", f"g-{topic}"
    pid, epoch = _init(kafka, txn_id)

    def commit(version: int, topics: list[Any], **fields: Any) -> list[tuple[Any, int, int]]:
        body = _txn_commit_body(txn_id, group, pid, epoch, topics, 11, "m") | fields
        answer = kafka.request(TXN_OFFSET_COMMIT, version, body).topics
        return [
            (t.topic_id if version >= 6 else t.name, p.partition_index, p.error_code)
            for t in answer
            for p in t.partitions
        ]

    assert commit(6, [{"topic_id": topic_id}, {"topic_id": unknown_id}]) == [
        (topic_id, 0, NONE),
        (unknown_id, 0, UNKNOWN_TOPIC_ID),
    ]
    # A member (generation 3) of a group nobody made: v6 says so, v5 as Kafka before.
    member = {"generation_id": 3, "member_id": "m-1", "group_id": group + "-none"}
    assert commit(6, [{"topic_id": topic_id}], **member) == [(topic_id, 0, GROUP_ID_NOT_FOUND)]
    assert commit(5, [{"name": topic}], **member) == [(topic, 0, ILLEGAL_GENERATION)]
    # A consumer-protocol member (KIP-848) at an epoch it does not have: STALE_MEMBER_EPOCH.
    cg = group + "-cg"
    joined = kafka.request(
        CG_HEARTBEAT,
        1,
        {
            "group_id": cg,
            "member_id": str(uuid.uuid4()),
            "member_epoch": 0,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": 30_000,
            "subscribed_topic_names": [topic],
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": [],
        },
    )
    assert joined.error_code == NONE, joined
    stale = {"group_id": cg, "member_id": joined.member_id}
    stale["generation_id"] = joined.member_epoch + 1
    assert commit(6, [{"topic_id": topic_id}], **stale) == [(topic_id, 0, STALE_MEMBER_EPOCH)]
    assert commit(5, [{"name": topic}], **stale) == [(topic, 0, ILLEGAL_GENERATION)]
    current = stale | {"generation_id": joined.member_epoch}
    assert commit(6, [{"topic_id": topic_id}], **current) == [(topic_id, 0, NONE)]
    assert _end(kafka, txn_id, pid, epoch, commit=True).error_code == NONE
    req = {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}
    [p] = kafka.request(OFFSET_FETCH, 7, req | {"require_stable": False}).topics[0].partitions
    assert (p.committed_offset, p.metadata) == (11, "m")


def test_an_exhausted_epoch_moves_the_id_to_a_new_producer_id(
    kafka: RawKafka, redis_server: RedisServer
) -> None:
    topic = f"tv2-{uuid.uuid4().hex[:10]}"
    create(kafka, topic)
    txn_id = f"tx-{topic}"
    pid, _ = _init(kafka, txn_id)
    # 32,765 transactions later (Kafka Streams commits every 100 ms: under an hour).
    epoch = 32766
    redis_server.client().hset(f"skiff:{{txn/{txn_id}}}:producer", "epoch", epoch)
    assert _produce(kafka, txn_id, topic, pid, epoch, 0, [b"last"]).error_code == NONE
    ended = _end(kafka, txn_id, pid, epoch, commit=True)
    assert ended.error_code == NONE
    new_pid = int(ended.producer_id)
    assert new_pid != pid and ended.producer_epoch == 0
    # Its marker is the old id's, at the last epoch; a retry gets the same answer.
    assert stored_batches(kafka, topic)[-1] == (1, True, 32767, [b"\x00\x00\x00\x01"])
    again = _end(kafka, txn_id, pid, epoch, commit=True)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, new_pid, 0)
    # The new id produces from sequence 0 at epoch 0.
    assert _produce(kafka, txn_id, topic, new_pid, 0, 0, [b"next"]).error_code == NONE
    ended = _end(kafka, txn_id, new_pid, 0, commit=True)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (NONE, new_pid, 1)


@pytest.fixture
def quick_sweep(own_redis: RedisServer, tmp_path: Path) -> Iterator[Skiff]:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "200",
    )
    yield server
    stop_process(server.proc)


def test_a_commit_after_the_coordinator_aborted_is_fenced(quick_sweep: Skiff) -> None:
    """A transaction past its timeout is aborted with the epoch bumped: the late commit
    is fenced (KAFKA-20785), a late abort answered as a retry of that abort."""
    with RawKafka("127.0.0.1", quick_sweep.port) as kafka:
        topic = f"tv2-{uuid.uuid4().hex[:10]}"
        create(kafka, topic)
        txn_id = f"tx-{topic}"
        pid, epoch = _init(kafka, txn_id, timeout_ms=1000)
        assert _produce(kafka, txn_id, topic, pid, epoch, 0, [b"slow"]).error_code == NONE
        wait_for(
            lambda: any(b[1] for b in stored_batches(kafka, topic)),
            timeout=30,
            what="the timeout abort's marker",
        )
        assert stored_batches(kafka, topic)[-1] == (1, True, epoch + 1, [b"\x00\x00\x00\x00"])
        assert _end(kafka, txn_id, pid, epoch, commit=True).error_code == PRODUCER_FENCED
        aborted = _end(kafka, txn_id, pid, epoch, commit=False)
        assert (aborted.error_code, aborted.producer_epoch) == (NONE, epoch + 1)


def test_kafka44_message_copier_commits_offsets_by_topic_id(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """Kafka 4.4's TransactionalMessageCopier (a Java 4.4 consume-transform-produce loop
    with sendOffsetsToTransaction and random aborts) over transaction version 2: its
    offsets go in TxnOffsetCommit v6, by topic id. The committed output is the input,
    exactly once and in order, and the group's offset is the input's end."""
    from confluent_kafka import Consumer, TopicPartition
    from kafka_tools import ToolsUnavailable, kafka_cli

    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    source, sink = f"copy-in-{uuid.uuid4().hex[:8]}", f"copy-out-{uuid.uuid4().hex[:8]}"
    total = 1000
    try:
        with RawKafka("127.0.0.1", skiff.port) as kafka:
            create(kafka, source)
            create(kafka, sink)
            for start in range(0, total, 100):
                values = [f"v{i}".encode() for i in range(start, start + 100)]
                assert produce_values(kafka, source, values) == start
        args = ["--broker-list", skiff.bootstrap, "--input-topic", source]
        args += ["--input-partition", "0", "--output-topic", sink, "--max-messages", "-1"]
        args += ["--transaction-size", "50", "--transactional-id", f"tx-{source}"]
        args += ["--consumer-group", f"g-{source}", "--group-mode", "--use-group-metadata"]
        args += ["--enable-random-aborts"]
        try:
            cmd = kafka_cli.command(
                "org.apache.kafka.tools.TransactionalMessageCopier", args, "ERROR", "4.4.0"
            )
        except ToolsUnavailable as exc:
            pytest.skip(f"no Kafka 4.4.0: {exc}")
        copier = subprocess.run(
            cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300
        )
        assert copier.returncode == 0, copier.stderr[-2000:]

        consumer = Consumer(
            {
                "bootstrap.servers": skiff.bootstrap,
                "group.id": f"check-{sink}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        consumer.assign([TopicPartition(sink, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < total and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(500, 1.0) if not m.error()]
        consumer.close()
        assert got == [f"v{i}".encode() for i in range(total)]
        # The copier's group (not this consumer's): its offset is the input's end.
        checker = Consumer({"bootstrap.servers": skiff.bootstrap, "group.id": f"g-{source}"})
        [offset] = checker.committed([TopicPartition(source, 0)], 10)
        checker.close()
        assert offset.offset == total
        by_version = {
            dict(labels)["version"]: count
            for (name, labels), count in scrape(skiff.http_port).items()
            if name == "skiff_requests_total" and dict(labels)["api"] == "txn_offset_commit"
        }
        assert by_version.get("6", 0) >= total // 50, by_version
    finally:
        stop_process(skiff.proc)


def produce_values(kafka: RawKafka, topic: str, values: list[bytes]) -> int:
    """One plain batch; its base offset."""
    body = produce_request(topic, {0: build_batch(values)})
    [p] = kafka.request(PRODUCE, 9, body).responses[0].partition_responses
    assert p.error_code == NONE, p
    return int(p.base_offset)
