"""share.isolation.level for share groups and HTTP queue groups (issue 17): a
read_committed group is handed committed records only, never past the last stable
offset, and the offsets of aborted transactions and markers are finished without a
delivery; read_uncommitted hands out every data record (markers never). Real
transactional producers (librdkafka) on both storage formats, over TCP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from conftest import Skiff
from rawkafka import RawKafka, fetched_records, metadata_request
from share_raw import ACCEPT, ShareMember, acquired_offsets
from test_queues_http import Api, check, committed, configure, create_topic, read, settle
from test_share_groups import _configure

DESCRIBE_CONFIGS = 32
GROUP_RESOURCE = 32


@pytest.fixture
def api(skiff: Skiff) -> Iterator[Api]:
    client = Api(skiff.http_port)
    yield client
    client.close()


def _transactional(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    return producer


def _plain(bootstrap: str, topic: str, value: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


def _txn(producer: Producer, topic: str, values: list[bytes]) -> None:
    producer.begin_transaction()
    for v in values:
        producer.produce(topic, v, partition=0)
    assert producer.flush(30) == 0


def _mixed_log(bootstrap: str, topic: str, fmt: str) -> Producer:
    """Offsets 0 p0 | 1-2 committed a0 a1, 3 COMMIT | 4-5 aborted b0 b1, 6 ABORT |
    7 p1 | 8 c0 of a transaction left open (the last stable offset) | 9 p2. Returns
    the producer of the open transaction."""
    create_topic(bootstrap, topic, fmt=fmt)
    _plain(bootstrap, topic, b"p0")
    producer = _transactional(bootstrap, f"tx-{topic}")
    _txn(producer, topic, [b"a0", b"a1"])
    producer.commit_transaction(30)
    _txn(producer, topic, [b"b0", b"b1"])
    producer.abort_transaction(30)
    _plain(bootstrap, topic, b"p1")
    _txn(producer, topic, [b"c0"])
    _plain(bootstrap, topic, b"p2")
    return producer


def _values(records: list[dict]) -> list[tuple[int, str]]:
    return [(r["offset"], r["value"]) for r in records]


@pytest.mark.parametrize("fmt", ["batch", "record"])
def test_http_queue_groups_read_committed_and_uncommitted(skiff: Skiff, api: Api, fmt: str) -> None:
    tag = uuid.uuid4().hex[:10]
    topic = f"qi-{tag}"
    producer = _mixed_log(skiff.bootstrap, topic, fmt)
    committed_group, uncommitted_group = f"qc-{tag}", f"qu-{tag}"
    configure(api, committed_group, isolation_level="read_committed")
    configure(api, uncommitted_group)
    status, body = api.call("GET", f"/v1/queues/{committed_group}")
    assert status == 200 and body["isolation_level"] == "read_committed", body
    status, body = api.call("PUT", f"/v1/queues/{committed_group}", {"isolation_level": "x"})
    assert status == 400 and body["error"]["code"] == "INVALID_CONFIG", body
    check("Error", body)

    got = read(api, committed_group, topic, "w", 100)
    assert _values(got) == [(0, "p0"), (1, "a0"), (2, "a1"), (7, "p1")]
    assert read(api, committed_group, topic, "w", 100) == []  # 8 is the last stable offset
    assert settle(api, committed_group, "acknowledge", "w", got)[0] == 200
    # Markers and aborted records are finished: the group has nothing before 8.
    assert committed(skiff.bootstrap, committed_group, topic) == [8]

    got = read(api, uncommitted_group, topic, "w", 100)
    assert _values(got) == [
        (0, "p0"), (1, "a0"), (2, "a1"), (4, "b0"), (5, "b1"), (7, "p1"), (8, "c0"), (9, "p2"),
    ]  # fmt: skip
    assert settle(api, uncommitted_group, "acknowledge", "w", got)[0] == 200
    assert committed(skiff.bootstrap, uncommitted_group, topic) == [10]

    producer.commit_transaction(30)  # marker at 10
    got = read(api, committed_group, topic, "w", 100, wait_ms=5000)
    assert _values(got) == [(8, "c0"), (9, "p2")]
    assert settle(api, committed_group, "acknowledge", "w", got)[0] == 200
    assert committed(skiff.bootstrap, committed_group, topic) == [11]


def _topic_id(port: int, topic: str) -> uuid.UUID:
    with RawKafka("127.0.0.1", port) as kafka:
        resp = kafka.request(3, 12, metadata_request([topic], allow_auto_topic_creation=False))
    return resp.topics[0].topic_id


def _described_isolation(port: int, group: str) -> tuple[str, int]:
    with RawKafka("127.0.0.1", port) as kafka:
        resp = kafka.request(
            DESCRIBE_CONFIGS,
            4,
            {
                "resources": [
                    {
                        "resource_type": GROUP_RESOURCE,
                        "resource_name": group,
                        "configuration_keys": ["share.isolation.level"],
                    }
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
    [r] = resp.results
    [c] = r.configs
    return c.value, c.config_source


@pytest.mark.parametrize("fmt", ["batch", "record"])
def test_share_group_read_committed_skips_aborted_records_and_markers(
    skiff: Skiff, fmt: str
) -> None:
    topic = f"si-{uuid.uuid4().hex[:10]}"
    producer = _mixed_log(skiff.bootstrap, topic, fmt)
    group = f"sg-{uuid.uuid4().hex[:10]}"
    assert _described_isolation(skiff.port, group) == ("read_uncommitted", 5)  # DEFAULT
    _configure(
        skiff,
        group,
        **{"share.auto.offset.reset": "earliest", "share.isolation.level": "read_committed"},
    )
    assert _described_isolation(skiff.port, group) == ("read_committed", 8)  # GROUP_CONFIG
    tid = _topic_id(skiff.port, topic)
    m = ShareMember("127.0.0.1", skiff.port, group)
    try:
        m.join([topic])
        resp = m.fetch({tid: [0]}, max_records=100)
        assert acquired_offsets(resp)[(tid, 0)] == [(0, 1), (1, 1), (2, 1), (7, 1)]
        [p] = resp.responses[0].partitions
        # Only the batches of p0, the committed transaction and p1: no marker, no b0/b1.
        assert [(r.offset, r.value) for r in fetched_records(p.records)] == [
            (0, b"p0"), (1, b"a0"), (2, b"a1"), (7, b"p1"),
        ]  # fmt: skip
        acks = {(tid, 0): [(0, 2, [ACCEPT]), (7, 7, [ACCEPT])]}
        resp = m.fetch({tid: [0]}, acks=acks, max_records=100)
        assert (tid, 0) not in acquired_offsets(resp)  # nothing at the last stable offset

        producer.commit_transaction(30)
        resp = m.fetch({tid: [0]}, max_records=100, max_wait_ms=5000)
        assert acquired_offsets(resp)[(tid, 0)] == [(8, 1), (9, 1)]
        [p] = resp.responses[0].partitions
        assert [(r.offset, r.value) for r in fetched_records(p.records)] == [
            (8, b"c0"), (9, b"p2"),
        ]  # fmt: skip
    finally:
        m.close()


@pytest.mark.parametrize("fmt", ["batch", "record"])
def test_share_group_read_uncommitted_gets_aborted_records_but_no_markers(
    skiff: Skiff, fmt: str
) -> None:
    topic = f"su-{uuid.uuid4().hex[:10]}"
    producer = _mixed_log(skiff.bootstrap, topic, fmt)
    producer.abort_transaction(30)  # marker at 10
    group = f"sg-{uuid.uuid4().hex[:10]}"
    _configure(skiff, group, **{"share.auto.offset.reset": "earliest"})
    tid = _topic_id(skiff.port, topic)
    m = ShareMember("127.0.0.1", skiff.port, group)
    try:
        m.join([topic])
        resp = m.fetch({tid: [0]}, max_records=100)
        want = [0, 1, 2, 4, 5, 7, 8, 9]
        assert acquired_offsets(resp)[(tid, 0)] == [(o, 1) for o in want]
        [p] = resp.responses[0].partitions
        assert [r.offset for r in fetched_records(p.records)] == want
    finally:
        m.close()
