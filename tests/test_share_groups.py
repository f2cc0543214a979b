"""Kafka share groups (KIP-932) against Skiff, through real TCP: Kafka 4.2's
KafkaShareConsumer in explicit acknowledgement mode (tests/java-share), its
AdminClient, and raw ShareGroupHeartbeat / ShareFetch / ShareAcknowledge requests
(tests/share_raw.py) for the protocol's error answers."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clients import java_share_client as java
from clients.java_share_client import ShareConsumer
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import RedisServer, Skiff, start_redis, start_skiff, stop_process
from log_helpers import fetch
from rawkafka import RawKafka, Rec, build_batch, metadata_request, produce_request
from share_raw import ACCEPT, GAP, REJECT, RELEASE, RENEW, ShareMember, acquired_offsets
from share_raw import partition_errors as perrors

INVALID_RECORD_STATE = 121
SHARE_SESSION_NOT_FOUND = 122
INVALID_SHARE_SESSION_EPOCH = 123
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
GROUP_ID_NOT_FOUND = 69
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
NOT_COORDINATOR = 16
LOCK_MS = 2000


def _group() -> str:
    return f"share-{uuid.uuid4().hex[:10]}"


def _create(bootstrap: str, topic: str, partitions: int = 1, fmt: str = "record") -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, 1, config={"skiff.storage.format": fmt})
    admin.create_topics([new])[topic].result(30)


def _produce(
    bootstrap: str,
    topic: str,
    n: int,
    partition: int | None = None,
    one_per_batch: bool = False,
    first: int = 0,
) -> None:
    """n records; `one_per_batch` sends each in a batch of its own, so that a share
    fetch on a `batch` topic (which acquires whole stored batches, as Kafka) acquires
    record by record as on a `record` topic."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(first, first + n):
        kwargs: dict[str, Any] = {"value": f"v-{i}".encode(), "key": f"k-{i}".encode()}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
        if one_per_batch:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0


def _configure(skiff: Skiff, group: str, **configs: str) -> None:
    """Group configs through IncrementalAlterConfigs (resource type GROUP), raw."""
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(
            44,
            1,
            {
                "resources": [
                    {
                        "resource_type": 32,
                        "resource_name": group,
                        "configs": [
                            {"name": k, "config_operation": 0, "value": v}
                            for k, v in configs.items()
                        ],
                    }
                ],
                "validate_only": False,
            },
        )
    [r] = resp.responses
    assert r.error_code == 0, r


def _earliest(skiff: Skiff, group: str, lock_ms: int = LOCK_MS, **more: str) -> None:
    """share.auto.offset.reset=earliest and the lock duration. Kafka's group config allows
    15 - 60 s locks: shorter ones (tests of expiry) go through the HTTP queue API, whose
    lock_ms is the same setting."""
    if 15_000 <= lock_ms <= 60_000:
        more = {"share.record.lock.duration.ms": str(lock_ms), **more}
    else:
        request = urllib.request.Request(
            f"http://127.0.0.1:{skiff.http_port}/v1/queues/{group}",
            json.dumps({"lock_ms": lock_ms}).encode(),
            {"Content-Type": "application/json"},
            method="PUT",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status in (200, 201), answer.read()
    _configure(skiff, group, **{"share.auto.offset.reset": "earliest", **more})


def _topic_id(skiff: Skiff, topic: str) -> uuid.UUID:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(3, 12, metadata_request([topic], allow_auto_topic_creation=False))
    [t] = resp.topics
    assert t.error_code == 0
    return t.topic_id


def _raw_offsets(skiff: Skiff, group: str, topic: str) -> tuple[int, int]:
    """(start offset, lag) of partition 0 by DescribeShareGroupOffsets v1."""
    return _raw_offsets_of(skiff, group, topic, 0)


def _raw_offsets_of(skiff: Skiff, group: str, topic: str, partition: int) -> tuple[int, int]:
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(
            90,
            1,
            {
                "groups": [
                    {
                        "group_id": group,
                        "topics": [{"topic_name": topic, "partitions": [partition]}],
                    }
                ]
            },
        )
    [g] = resp.groups
    [t] = g.topics
    [p] = t.partitions
    assert (g.error_code, p.error_code) == (0, 0)
    return p.start_offset, p.lag


def _first_record(bootstrap: str, topic: str) -> Any:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False}
    )
    consumer.assign([CTopicPartition(topic, 0, 0)])
    msg = None
    end = time.monotonic() + 30
    while msg is None and time.monotonic() < end:
        msg = consumer.poll(1.0)
    consumer.close()
    assert msg is not None and msg.error() is None
    return msg


def _poll_until(c: ShareConsumer, want: int, timeout_s: float = 60) -> list[dict[str, Any]]:
    """Poll (without acknowledging) until a poll returns records."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        recs = c.poll(500)
        if recs:
            return recs
    raise AssertionError(f"no records within {timeout_s}s (wanted {want})")


@pytest.fixture
def topic(skiff: Skiff, request: pytest.FixtureRequest) -> Iterator[str]:
    """A topic of the storage format given by an indirect parameter (BOTH), else record."""
    name = f"share-t-{uuid.uuid4().hex[:10]}"
    _create(skiff.bootstrap, name, fmt=getattr(request, "param", "record"))
    yield name


# The tests that exercise per-record state run on both storage formats, same assertions.
BOTH = pytest.mark.parametrize("topic", ["record", "batch"], indirect=True)


# -- Java KafkaShareConsumer ----------------------------------------------------------


def _accept_all(bootstraps: list[str], group: str, topic: str, total: int) -> list[tuple[int, int]]:
    """One Java share consumer per bootstrap address, polling, accepting and committing
    until `total` records were seen: the (partition, offset) of every record seen."""
    seen: list[tuple[int, int]] = []
    commit_errors: list[Any] = []
    lock = threading.Lock()
    done = threading.Event()

    def run(name: str, bootstrap: str) -> None:
        with ShareConsumer(
            bootstrap, group, [topic], {"max.poll.records": "20"}, client_id=name
        ) as c:
            end = time.monotonic() + 120
            while not done.is_set() and time.monotonic() < end:
                recs = c.poll(500)
                if not recs:
                    continue
                c.ack_all("accept")
                errors = {k: v for k, v in c.commit().items() if v}
                with lock:
                    seen.extend((r["partition"], r["offset"]) for r in recs)
                    commit_errors.extend(errors.items())
                    if len(seen) >= total:
                        done.set()

    threads = [threading.Thread(target=run, args=(f"c{i}", b)) for i, b in enumerate(bootstraps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not commit_errors
    assert len(seen) == total, f"{len(seen)} records, {len(set(seen))} distinct"
    assert len(set(seen)) == total  # nobody got a record twice
    return seen


def test_two_java_consumers_accept_every_record_exactly_once(skiff: Skiff) -> None:
    topic = f"share-t-{uuid.uuid4().hex[:10]}"
    _create(skiff.bootstrap, topic, partitions=2)
    group = _group()
    _earliest(skiff, group, lock_ms=30_000)
    total = 400
    _produce(skiff.bootstrap, topic, total)
    seen = _accept_all([skiff.bootstrap, skiff.bootstrap], group, topic, total)
    [offsets] = java.admin(skiff.bootstrap, [{"op": "offsets", "group": group}])
    assert offsets["offsets"] == {
        f"{topic}-{p}": {"start_offset": n, "lag": 0}
        for p, n in sorted({p: sum(1 for q, _ in seen if q == p) for p in (0, 1)}.items())
    }


def test_share_consumers_across_two_sidecars(own_redis: RedisServer, tmp_path: Path) -> None:
    """Two sidecars on one Redis: partitions are led by different sidecars, so each
    consumer keeps a share session on both, and the coordinator is one of them."""
    sidecars = [
        start_skiff(tmp_path / f"skiff{i}.log", "--redis-url", own_redis.url) for i in range(2)
    ]
    try:
        topic = f"share-t-{uuid.uuid4().hex[:10]}"
        _create(sidecars[0].bootstrap, topic, partitions=4)
        group = _group()
        _earliest(sidecars[0], group, lock_ms=30_000)
        _produce(sidecars[1].bootstrap, topic, 400)
        seen = _accept_all([s.bootstrap for s in sidecars], group, topic, 400)
        assert {p for p, _ in seen} == {0, 1, 2, 3}
        for s in sidecars:  # any sidecar reads the same offsets from Redis
            assert _raw_offsets(s, group, topic) == (
                sum(1 for p, _ in seen if p == 0),
                0,
            )
    finally:
        for s in sidecars:
            stop_process(s.proc)


@pytest.mark.parametrize("codec", ["zstd", "lz4", "gzip", "snappy"])
def test_records_arrive_in_the_topics_compression(skiff: Skiff, codec: str) -> None:
    topic = f"share-t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": skiff.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": codec})])[topic].result(
        30
    )
    group = _group()
    _earliest(skiff, group, lock_ms=30_000)
    producer = Producer({"bootstrap.servers": skiff.bootstrap, "linger.ms": 5})
    for i in range(50):
        producer.produce(topic, key=None, value=f"value-{i}".encode() * 10, headers=[("h", b"x")])
    assert producer.flush(30) == 0
    with ShareConsumer(skiff.bootstrap, group, [topic]) as c:
        got: list[dict[str, Any]] = []
        end = time.monotonic() + 60
        while len(got) < 50 and time.monotonic() < end:
            recs = c.poll(500)
            got += recs
            if recs:
                c.ack_all("accept")
                assert c.commit() == {f"{topic}-0": None}
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in got] == [
        (i, None, f"value-{i}".encode() * 10, [("h", b"x")]) for i in range(50)
    ]


def test_release_redelivers_with_a_growing_delivery_count(skiff: Skiff, topic: str) -> None:
    group = _group()
    _earliest(skiff, group, lock_ms=30_000)
    _produce(skiff.bootstrap, topic, 3)
    with ShareConsumer(skiff.bootstrap, group, [topic]) as c:
        first = _poll_until(c, 3)
        assert [(r["offset"], r["delivery_count"], r["value"]) for r in first] == [
            (0, 1, b"v-0"),
            (1, 1, b"v-1"),
            (2, 1, b"v-2"),
        ]
        assert first[0]["key"] == b"k-0"
        assert c.lock_timeout_ms == 30_000
        c.ack(first[0], "release")
        c.ack(first[1], "accept")
        c.ack(first[2], "accept")
        assert c.commit() == {f"{topic}-0": None}
        for count in (2, 3):
            again = _poll_until(c, 1)
            assert [(r["offset"], r["delivery_count"], r["value"]) for r in again] == [
                (0, count, b"v-0")
            ]
            c.ack(again[0], "release" if count == 2 else "accept")
            assert c.commit() == {f"{topic}-0": None}
        assert c.poll(1000) == []


def test_reject_finishes_and_dead_letters(skiff: Skiff, topic: str) -> None:
    group = _group()
    dlq = f"{topic}.dlq"
    _earliest(skiff, group, lock_ms=30_000, **{"errors.deadletterqueue.topic.name": dlq})
    _produce(skiff.bootstrap, topic, 2)
    with ShareConsumer(skiff.bootstrap, group, [topic]) as c:
        recs = _poll_until(c, 2)
        assert [r["offset"] for r in recs] == [0, 1]
        c.ack(recs[0], "reject")
        c.ack(recs[1], "accept")
        assert c.commit() == {f"{topic}-0": None}
        assert c.poll(1500) == []  # rejected: never delivered again
    [offsets] = java.admin(skiff.bootstrap, [{"op": "offsets", "group": group}])
    assert offsets["offsets"] == {f"{topic}-0": {"start_offset": 2, "lag": 0}}
    msg = _first_record(skiff.bootstrap, dlq)
    assert (msg.key(), msg.value()) == (b"k-0", b"v-0")
    assert dict(msg.headers()) == {
        "skiff.dlq.reason": b"rejected",
        "skiff.dlq.group": group.encode(),
        "skiff.dlq.topic": topic.encode(),
        "skiff.dlq.partition": b"0",
        "skiff.dlq.offset": b"0",
        "skiff.dlq.delivery.count": b"1",
    }


@BOTH
def test_past_the_delivery_limit_records_are_dead_lettered(skiff: Skiff, topic: str) -> None:
    group = _group()
    dlq = f"{topic}.dlq"
    _earliest(
        skiff,
        group,
        lock_ms=30_000,
        **{"share.delivery.count.limit": "2", "errors.deadletterqueue.topic.name": dlq},
    )
    _produce(skiff.bootstrap, topic, 1)
    with ShareConsumer(skiff.bootstrap, group, [topic]) as c:
        for count in (1, 2):
            [rec] = _poll_until(c, 1)
            assert (rec["offset"], rec["delivery_count"]) == (0, count)
            c.ack(rec, "release")
            assert c.commit() == {f"{topic}-0": None}
        assert c.poll(1500) == []  # at the limit: rejected instead of delivered again
    msg = _first_record(skiff.bootstrap, dlq)
    headers = dict(msg.headers())
    assert (msg.value(), headers["skiff.dlq.reason"], headers["skiff.dlq.delivery.count"]) == (
        b"v-0",
        b"delivery limit",
        b"2",
    )
    assert _raw_offsets(skiff, group, topic) == (1, 0)


def test_records_of_a_silent_consumer_go_to_another_after_the_lock(
    skiff: Skiff, topic: str
) -> None:
    group = _group()
    _earliest(skiff, group, lock_ms=4000)
    _produce(skiff.bootstrap, topic, 5)
    with ShareConsumer(skiff.bootstrap, group, [topic]) as slow:
        held = _poll_until(slow, 5)
        assert [(r["offset"], r["delivery_count"]) for r in held] == [(i, 1) for i in range(5)]
        with ShareConsumer(skiff.bootstrap, group, [topic]) as other:
            # Nothing while the lock lasts, then every record with a second delivery
            # (their locks ended together: one fetch).
            got = _poll_until(other, 5, timeout_s=60)
            assert [(r["offset"], r["delivery_count"]) for r in got] == [(i, 2) for i in range(5)]
            # The slow consumer's acknowledgement comes too late: refused, nothing changes.
            slow.ack_all("accept")
            [result] = slow.commit().values()
            assert result is not None and result.startswith("InvalidRecordStateException")
            assert _raw_offsets(skiff, group, topic) == (0, 5)
            other.ack_all("accept")
            assert other.commit() == {f"{topic}-0": None}
    [offsets] = java.admin(skiff.bootstrap, [{"op": "offsets", "group": group}])
    assert offsets["offsets"] == {f"{topic}-0": {"start_offset": 5, "lag": 0}}


@BOTH
def test_admin_tracks_the_lowest_unfinished_offset(skiff: Skiff, topic: str) -> None:
    group = _group()
    _earliest(skiff, group, lock_ms=30_000)
    _produce(skiff.bootstrap, topic, 10)
    with ShareConsumer(skiff.bootstrap, group, [topic]) as c:
        recs = _poll_until(c, 10)
        assert len(recs) == 10
        for r in recs:
            if r["offset"] != 3:
                c.ack(r, "accept")
        assert c.commit() == {f"{topic}-0": None}
        describe, offsets, listed = java.admin(
            skiff.bootstrap,
            [
                {"op": "describe", "group": group},
                {"op": "offsets", "group": group},
                {"op": "list"},
            ],
        )
        assert offsets["offsets"] == {f"{topic}-0": {"start_offset": 3, "lag": 1}}
        assert describe["state"] == "Stable"
        [member] = describe["members"]
        assert member["assignment"] == [f"{topic}-0"]
        assert {"group": group, "type": "Share", "state": "Stable"} in listed["groups"]
        c.ack(recs[3], "accept")
        assert c.commit() == {f"{topic}-0": None}
        [offsets] = java.admin(skiff.bootstrap, [{"op": "offsets", "group": group}])
        assert offsets["offsets"] == {f"{topic}-0": {"start_offset": 10, "lag": 0}}
        # Only an empty group's offsets can be altered.
        [alter] = java.admin(
            skiff.bootstrap,
            [{"op": "alter_offsets", "group": group, "offsets": {f"{topic}-0": 4}}],
        )
        assert alter["error"] == "GroupNotEmptyException"
    [alter, offsets] = java.admin(
        skiff.bootstrap,
        [
            {"op": "alter_offsets", "group": group, "offsets": {f"{topic}-0": 4}},
            {"op": "offsets", "group": group},
        ],
    )
    assert alter == {"op": "alter_offsets", "ok": True}
    assert offsets["offsets"] == {f"{topic}-0": {"start_offset": 4, "lag": 6}}
    with ShareConsumer(skiff.bootstrap, group, [topic]) as c:
        recs = _poll_until(c, 6)
        assert [r["offset"] for r in recs] == [4, 5, 6, 7, 8, 9]
        c.ack_all("accept")
        c.commit()
        [deleted] = java.admin(skiff.bootstrap, [{"op": "delete", "group": group}])
        assert deleted["error"] == "GroupNotEmptyException"
    deleted, listed, offsets = java.admin(
        skiff.bootstrap,
        [{"op": "delete", "group": group}, {"op": "list"}, {"op": "offsets", "group": group}],
    )
    assert deleted == {"op": "delete", "ok": True}
    assert group not in {g["group"] for g in listed["groups"]}
    assert offsets["offsets"] == {}


# -- raw protocol: errors and session rules --------------------------------------------


@BOTH
def test_share_session_epochs_and_acknowledge_errors(skiff: Skiff, topic: str) -> None:
    group = _group()
    _earliest(skiff, group)
    _produce(skiff.bootstrap, topic, 4, one_per_batch=True)
    tid = _topic_id(skiff, topic)
    a = ShareMember("127.0.0.1", skiff.port, group)
    b = ShareMember("127.0.0.1", skiff.port, group)
    try:
        a.join([topic])
        b.join([topic])
        # An epoch before the session exists: SHARE_SESSION_NOT_FOUND.
        assert a.fetch({tid: [0]}, epoch=1).error_code == SHARE_SESSION_NOT_FOUND
        # Acknowledgements on the opening fetch are refused.
        resp = a.fetch({}, acks={(tid, 0): [(0, 0, [ACCEPT])]}, epoch=0)
        assert resp.error_code == INVALID_REQUEST
        resp = a.fetch({tid: [0]}, max_records=2)
        assert (
            resp.error_code == 0 and resp.acquisition_lock_timeout.total_seconds() * 1000 == LOCK_MS
        )
        assert acquired_offsets(resp) == {(tid, 0): [(0, 1), (1, 1)]}
        # A wrong epoch: INVALID_SHARE_SESSION_EPOCH, the session stays as it was.
        assert a.fetch({tid: [0]}, epoch=7).error_code == INVALID_SHARE_SESSION_EPOCH
        assert a.acknowledge({(tid, 0): [(0, 0, [ACCEPT])]}, epoch=0).error_code == (
            INVALID_SHARE_SESSION_EPOCH
        )
        # b gets the next records, never a's.
        resp = b.fetch({tid: [0]}, max_records=10)
        assert acquired_offsets(resp) == {(tid, 0): [(2, 1), (3, 1)]}
        # a acknowledges b's record: INVALID_RECORD_STATE, nothing changes.
        resp = a.acknowledge({(tid, 0): [(2, 2, [ACCEPT])]})
        assert resp.error_code == 0 and perrors(resp) == {(tid, 0): (INVALID_RECORD_STATE, 0)}
        # Its own record, piggy-backed on a fetch: accepted.
        resp = a.fetch({}, acks={(tid, 0): [(0, 0, [ACCEPT])]})
        assert perrors(resp)[(tid, 0)] == (0, 0)
        # Again: below the group's start offset now, ignored as Kafka does.
        resp = a.acknowledge({(tid, 0): [(0, 0, [ACCEPT])]})
        assert perrors(resp) == {(tid, 0): (0, 0)}
        # An offset never handed out, an acknowledge type that does not exist, renew
        # before v2: INVALID_REQUEST.
        for batches, version in (
            ([(9, 9, [ACCEPT])], 2),
            ([(1, 1, [9])], 2),
            ([(1, 1, [RENEW])], 1),
        ):
            resp = a.acknowledge({(tid, 0): batches}, version=version)
            assert perrors(resp) == {(tid, 0): (INVALID_REQUEST, 0)}, batches
        # Gaps (offsets without a record for the client) are no error and leave records
        # other members hold alone.
        resp = a.acknowledge({(tid, 0): [(2, 3, [GAP])]})
        assert perrors(resp) == {(tid, 0): (0, 0)}
        # Renew (v2) keeps the record; reject finishes it.
        resp = a.acknowledge({(tid, 0): [(1, 1, [RENEW])]})
        assert perrors(resp) == {(tid, 0): (0, 0)}
        resp = a.acknowledge({(tid, 0): [(1, 1, [REJECT])]})
        assert perrors(resp) == {(tid, 0): (0, 0)}
        # b leaves the session (epoch -1) without acknowledging: its records go back.
        resp = b.fetch({}, epoch=-1)
        assert resp.error_code == 0
        resp = a.fetch({tid: [0]}, max_records=10)
        assert acquired_offsets(resp) == {(tid, 0): [(2, 2), (3, 2)]}
        # Offset 0 accepted, 1 rejected: the lowest unfinished is 2.
        with RawKafka("127.0.0.1", skiff.port) as kafka:
            resp = kafka.request(
                90,
                1,
                {
                    "groups": [
                        {"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}
                    ]
                },
            )
        [g] = resp.groups
        [t] = g.topics
        [p] = t.partitions
        assert (g.error_code, p.error_code, p.start_offset, p.lag) == (0, 0, 2, 2)
    finally:
        a.close()
        b.close()


def test_heartbeat_errors(skiff: Skiff, topic: str) -> None:
    group = _group()
    m = ShareMember("127.0.0.1", skiff.port, group)
    try:
        assert m.heartbeat(0, None).error_code == INVALID_REQUEST  # no subscription
        resp = m.heartbeat(0, [topic])
        assert resp.error_code == 0 and resp.member_epoch >= 1
        [tp] = resp.assignment.topic_partitions
        assert (tp.topic_id, list(tp.partitions)) == (_topic_id(skiff, topic), [0])
        epoch = resp.member_epoch
        again = m.heartbeat(epoch)
        assert (again.error_code, again.member_epoch, again.assignment) == (0, epoch, None)
        assert m.heartbeat(epoch + 5).error_code == FENCED_MEMBER_EPOCH
        stranger = ShareMember("127.0.0.1", skiff.port, group)
        assert stranger.heartbeat(3).error_code == UNKNOWN_MEMBER_ID
        stranger.close()
        left = m.heartbeat(-1)
        assert (left.error_code, left.member_epoch) == (0, -1)
        assert m.heartbeat(epoch).error_code == UNKNOWN_MEMBER_ID
    finally:
        m.close()
    # A classic group's id is not a share group.
    classic = f"classic-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(
        {"bootstrap.servers": skiff.bootstrap, "group.id": classic, "enable.auto.commit": False}
    )
    consumer.commit(offsets=[CTopicPartition(topic, 0, 0)], asynchronous=False)
    consumer.close()
    m = ShareMember("127.0.0.1", skiff.port, classic)
    try:
        assert m.heartbeat(0, [topic]).error_code == GROUP_ID_NOT_FOUND
    finally:
        m.close()
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(
            77, 1, {"group_ids": [classic, f"none-{group}"], "include_authorized_operations": False}
        )
    assert [(g.error_code, g.error_message) for g in resp.groups] == [
        (GROUP_ID_NOT_FOUND, f"Group {classic} is not a share group."),
        (GROUP_ID_NOT_FOUND, f"Group none-{group} not found."),
    ]


def test_a_sidecar_that_lost_the_group_writes_no_membership(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """Membership writes are fenced by the group's lease, like a classic group's: a
    sidecar whose lease another sidecar took (it was paused past its registration)
    answers NOT_COORDINATOR and leaves the new coordinator's member list alone."""
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    group, topic = _group(), f"fenced-{uuid.uuid4().hex[:8]}"
    first = ShareMember("127.0.0.1", skiff.port, group)
    second = ShareMember("127.0.0.1", skiff.port, group)
    try:
        _create(skiff.bootstrap, topic)
        first.join([topic])
        r = own_redis.client()
        lease, share = f"skiff:{{g/{group}}}:lease", f"skiff:{{g/{group}}}:share"
        before = r.hgetall(share)
        assert f"m:{first.member_id}".encode() in before
        r.set(lease, "99:someone-else")  # another sidecar's token
        assert second.heartbeat(0, [topic]).error_code == NOT_COORDINATOR
        assert r.hgetall(share) == before  # nothing written
        assert r.get(lease) == b"99:someone-else"
    finally:
        first.close()
        second.close()
        stop_process(skiff.proc)


def test_java_consumer_and_http_worker_share_one_group(skiff: Skiff, topic: str) -> None:
    """A Java share consumer and an HTTP queue worker of one group id: a record leased
    to one is never handed to the other; released records move between them; every
    record is finished once."""
    import requests

    group = _group()
    _earliest(skiff, group, lock_ms=30_000)
    _produce(skiff.bootstrap, topic, 20)
    base = f"http://127.0.0.1:{skiff.http_port}/v1/queues/{group}"
    with ShareConsumer(skiff.bootstrap, group, [topic], {"max.poll.records": "5"}) as c:
        java_held = _poll_until(c, 5)
        java_offsets = {r["offset"] for r in java_held}
        assert len(java_offsets) == 5
        read = requests.post(
            f"{base}/records:read", json={"topics": [topic], "max_records": 100, "worker": "w1"}
        )
        assert read.status_code == 200, read.text
        http_offsets = {r["offset"] for r in read.json()["records"]}
        # The Java client prefetches beyond what poll returned: those are leased to it
        # too, so HTTP gets what is left and never a record Java holds.
        assert not http_offsets & java_offsets
        assert 10 <= len(http_offsets) <= 15
        # HTTP may not acknowledge Java's records.
        stolen = requests.post(
            f"{base}/records:acknowledge",
            json={
                "worker": "w1",
                "records": [{"topic": topic, "partition": 0, "offset": min(java_offsets)}],
            },
        )
        assert stolen.json()["results"][0]["error"]["code"] == "RECORD_HELD_BY_OTHER"
        released = sorted(http_offsets)[:3]
        done = sorted(http_offsets)[3:]
        for verb, offsets in (("cancel", released), ("acknowledge", done)):
            r = requests.post(
                f"{base}/records:{verb}",
                json={
                    "worker": "w1",
                    "records": [{"topic": topic, "partition": 0, "offset": o} for o in offsets],
                },
            )
            assert r.status_code == 200, r.text
        java_got = [(r["offset"], r["delivery_count"]) for r in java_held]
        c.ack_all("accept")
        assert c.commit() == {f"{topic}-0": None}
        end = time.monotonic() + 60
        while len(java_got) < 20 - len(done) and time.monotonic() < end:
            recs = c.poll(500)
            java_got += [(r["offset"], r["delivery_count"]) for r in recs]
            if recs:
                c.ack_all("accept")
                assert c.commit() == {f"{topic}-0": None}
        java_offsets_all = [o for o, _ in java_got]
        assert sorted(java_offsets_all + done) == list(range(20))  # each finished once
        assert {(o, n) for o, n in java_got if o in released} == {(o, 2) for o in released}
    described = requests.get(base).json()
    [part] = described["partitions"]
    assert (part["committed_offset"], part["pending"], part["lag"]) == (20, 0, 0)


def test_classic_join_to_a_share_group_is_refused(skiff: Skiff, topic: str) -> None:
    group = _group()
    m = ShareMember("127.0.0.1", skiff.port, group)
    try:
        m.join([topic])
    finally:
        m.close()
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(
            11,
            5,
            {
                "group_id": group,
                "session_timeout": 10_000,
                "rebalance_timeout": 10_000,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        )
    assert resp.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL


def test_share_apis_answer_retriable_errors_while_redis_is_down(tmp_path: Path) -> None:
    redis_server = start_redis(tmp_path / "redis")
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", redis_server.url, "--redis-retry-ms", "600"
    )
    try:
        topic = f"share-t-{uuid.uuid4().hex[:10]}"
        _create(server.bootstrap, topic)
        tid = _topic_id(server, topic)
        group = _group()
        m = ShareMember("127.0.0.1", server.port, group)
        m.join([topic])
        assert m.fetch({tid: [0]}).error_code == 0  # a session: epoch 1 next
        stop_process(redis_server.proc)
        NOT_LEADER, COORD_NA = 6, 15
        resp = m.acknowledge({(tid, 0): [(0, 0, [ACCEPT])]})
        assert perrors(resp) == {(tid, 0): (NOT_LEADER, 0)}
        resp = m.fetch({tid: [0]}, epoch=0)
        assert perrors(resp) == {(tid, 0): (NOT_LEADER, NOT_LEADER)}
        other = ShareMember("127.0.0.1", server.port, _group())
        assert other.heartbeat(0, [topic]).error_code == COORD_NA
        other.close()
        with RawKafka("127.0.0.1", server.port) as kafka:
            resp = kafka.request(77, 1, {"group_ids": ["g-down"]})
            assert [g.error_code for g in resp.groups] == [COORD_NA]
            resp = kafka.request(90, 1, {"groups": [{"group_id": "g-down", "topics": None}]})
            assert [g.error_code for g in resp.groups] == [COORD_NA]
            resp = kafka.request(91, 0, {"group_id": "g-down", "topics": []})
            assert resp.error_code == COORD_NA
        m.close()
    finally:
        stop_process(server.proc)
        stop_process(redis_server.proc)


@BOTH
def test_a_crashed_consumers_records_are_released_when_its_connection_closes(
    skiff: Skiff, topic: str
) -> None:
    """As Kafka: a share session ends with its client connection, and the records it
    acquired are available again at once, long before their lock would expire."""
    group = _group()
    _earliest(skiff, group, lock_ms=60_000)
    _produce(skiff.bootstrap, topic, 5)
    crashed = ShareConsumer(skiff.bootstrap, group, [topic])
    held = _poll_until(crashed, 5)
    assert [r["offset"] for r in held] == [0, 1, 2, 3, 4]
    crashed.kill()  # SIGKILL: no leave, no session close, just a dropped connection
    with ShareConsumer(skiff.bootstrap, group, [topic]) as other:
        got = _poll_until(other, 5, timeout_s=20)  # far below the 60 s lock
        assert [(r["offset"], r["delivery_count"]) for r in got] == [(i, 2) for i in range(5)]
        other.ack_all("accept")
        assert other.commit() == {f"{topic}-0": None}


def test_share_group_survives_its_coordinator_stopping(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """Two sidecars; the one coordinating the share group stops (SIGTERM hands its
    leases back). The other takes the group over with its members (from Redis), and the
    consumer goes on: every record is accepted exactly once."""
    sidecars = [
        start_skiff(tmp_path / f"skiff{i}.log", "--redis-url", own_redis.url) for i in range(2)
    ]
    try:
        topic = f"share-t-{uuid.uuid4().hex[:10]}"
        _create(sidecars[0].bootstrap, topic, partitions=2)
        group = _group()
        _earliest(sidecars[0], group, lock_ms=30_000)
        _produce(sidecars[0].bootstrap, topic, 100)
        bootstrap = ",".join(s.bootstrap for s in sidecars)
        seen: list[tuple[int, int]] = []
        with ShareConsumer(bootstrap, group, [topic], {"max.poll.records": "10"}) as c:

            def consume(until: int) -> None:
                end = time.monotonic() + 90
                while len(seen) < until and time.monotonic() < end:
                    recs = c.poll(500)
                    if recs:
                        c.ack_all("accept")
                        c.commit()
                        seen.extend((r["partition"], r["offset"]) for r in recs)

            consume(100)
            [described] = java.admin(bootstrap, [{"op": "describe", "group": group}])
            coordinator = described["coordinator"]
            with RawKafka("127.0.0.1", sidecars[0].port) as kafka:
                resp = kafka.request(3, 12, metadata_request([topic]))
            ports = {b.node_id: b.port for b in resp.brokers}
            [stopping] = [s for s in sidecars if s.port == ports[coordinator]]
            [staying] = [s for s in sidecars if s is not stopping]
            stop_process(stopping.proc)
            _produce(staying.bootstrap, topic, 100)
            consume(200)
            [described] = java.admin(staying.bootstrap, [{"op": "describe", "group": group}])
        assert len(seen) == 200 and len(set(seen)) == 200
        assert described["coordinator"] != coordinator
        assert len(described["members"]) == 1
    finally:
        for s in sidecars:
            stop_process(s.proc)


def test_group_configs_are_described_and_checked(skiff: Skiff) -> None:
    group = _group()
    _configure(
        skiff,
        group,
        **{"share.record.lock.duration.ms": "45000", "errors.deadletterqueue.topic.name": "dl"},
    )
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = kafka.request(
            32,
            4,
            {
                "resources": [
                    {"resource_type": 32, "resource_name": group, "configuration_keys": None}
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
        [r] = resp.results
        assert r.error_code == 0
        # Kafka 4.4's 21 group configs (tests/test_group_configs.py checks them all)
        described = {c.name: (c.value, c.config_source) for c in r.configs}
        assert len(r.configs) == len(described) == 21
        assert {n: v for n, v in described.items() if v[1] != 5} == {
            "errors.deadletterqueue.topic.name": ("dl", 8),
            "share.record.lock.duration.ms": ("45000", 8),
        }
        assert described["share.auto.offset.reset"] == ("latest", 5)
        assert described["share.delivery.count.limit"] == ("5", 5)
        assert described["share.isolation.level"] == ("read_uncommitted", 5)
        bad = [
            ("no.such.config", "1", 40),  # INVALID_CONFIG
            ("share.record.lock.duration.ms", "10", 40),
            ("share.record.lock.duration.ms", "soon", 40),
            ("share.auto.offset.reset", "middle", 40),
            ("share.isolation.level", "dirty", 40),
        ]
        for name, value, code in bad:
            resp = kafka.request(
                44,
                1,
                {
                    "resources": [
                        {
                            "resource_type": 32,
                            "resource_name": group,
                            "configs": [{"name": name, "config_operation": 0, "value": value}],
                        }
                    ],
                    "validate_only": False,
                },
            )
            assert [x.error_code for x in resp.responses] == [code], (name, value)


def test_java_and_http_workers_mixed_with_releases_finish_each_record_once(
    skiff: Skiff,
) -> None:
    """2 Java share consumers and 2 HTTP workers on one group, each releasing about one
    record in ten and accepting the rest: every acknowledgement succeeds (no record is
    ever leased to two at once) and every record is accepted exactly once."""
    import random

    import requests

    topic = f"share-t-{uuid.uuid4().hex[:10]}"
    _create(skiff.bootstrap, topic, partitions=2)
    group = _group()
    _earliest(skiff, group, lock_ms=60_000)
    total = 600
    _produce(skiff.bootstrap, topic, total)
    base = f"http://127.0.0.1:{skiff.http_port}/v1/queues/{group}"
    accepted: list[tuple[int, int]] = []
    failures: list[Any] = []
    lock = threading.Lock()
    done = threading.Event()

    def record_accepts(recs: list[tuple[int, int]]) -> None:
        with lock:
            accepted.extend(recs)
            if len(accepted) >= total:
                done.set()

    def java_worker(seed: int) -> None:
        rng = random.Random(seed)
        with ShareConsumer(skiff.bootstrap, group, [topic], {"max.poll.records": "25"}) as c:
            end = time.monotonic() + 120
            while not done.is_set() and time.monotonic() < end:
                recs = c.poll(300)
                keep = []
                for r in recs:
                    release = rng.random() < 0.1
                    c.ack(r, "release" if release else "accept")
                    if not release:
                        keep.append((r["partition"], r["offset"]))
                if recs:
                    errors = {k: v for k, v in c.commit().items() if v}
                    if errors:
                        failures.append(errors)
                    record_accepts(keep)

    def http_worker(seed: int) -> None:
        rng = random.Random(seed)
        session = requests.Session()
        end = time.monotonic() + 120
        while not done.is_set() and time.monotonic() < end:
            read = session.post(
                f"{base}/records:read",
                json={"topics": [topic], "max_records": 25, "wait_ms": 300, "worker": f"h{seed}"},
            ).json()["records"]
            by_verb: dict[str, list[dict[str, Any]]] = {"cancel": [], "acknowledge": []}
            for r in read:
                verb = "cancel" if rng.random() < 0.1 else "acknowledge"
                by_verb[verb].append(
                    {"topic": topic, "partition": r["partition"], "offset": r["offset"]}
                )
            for verb, recs in by_verb.items():
                if recs:
                    answer = session.post(
                        f"{base}/records:{verb}", json={"worker": f"h{seed}", "records": recs}
                    )
                    if answer.status_code != 200:
                        failures.append(answer.text)
            record_accepts([(r["partition"], r["offset"]) for r in by_verb["acknowledge"]])

    threads = [threading.Thread(target=java_worker, args=(i,)) for i in range(2)]
    threads += [threading.Thread(target=http_worker, args=(10 + i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not failures
    assert sorted(accepted) == sorted({(p, o) for p, o in accepted})  # none twice
    assert len(accepted) == total
    for p in (0, 1):
        assert _raw_offsets_of(skiff, group, topic, p)[1] == 0


def test_implicit_acknowledgement_accepts_what_was_polled(skiff: Skiff, topic: str) -> None:
    """The share consumer's default mode: the next poll (or commit) accepts the records
    the previous poll returned."""
    group = _group()
    _earliest(skiff, group, lock_ms=30_000)
    _produce(skiff.bootstrap, topic, 50)
    with ShareConsumer(
        skiff.bootstrap, group, [topic], {"share.acknowledgement.mode": "implicit"}
    ) as c:
        got: list[dict[str, Any]] = []
        end = time.monotonic() + 60
        while len(got) < 50 and time.monotonic() < end:
            got += c.poll(500)
        assert c.commit() == {f"{topic}-0": None}
    assert sorted(r["offset"] for r in got) == list(range(50))
    assert _raw_offsets(skiff, group, topic) == (50, 0)


@pytest.mark.parametrize("fmt", ["record", "batch"])
def test_records_compaction_removes_while_acquired(
    own_redis: RedisServer, tmp_path: Path, fmt: str
) -> None:
    """Records acquired by a share member that the background compactor then removes (a
    `batch` log is rewritten and swapped in): the member still acknowledges them, a
    released one is not delivered again (Kafka's consumer would acknowledge it as a
    gap), the next fetch gets the kept records once, and the start offset moves on."""
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", own_redis.url, "--log-cleaner-backoff-ms", "100"
    )
    try:
        topic, group = f"share-c-{uuid.uuid4().hex[:8]}", _group()
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        config = {"skiff.storage.format": fmt, "cleanup.policy": "compact"}
        admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
        meta = own_redis.client()

        def cleaned() -> int:
            return int(meta.hget(f"skiff:{{{topic}/0}}:meta", "cleaned") or 0)

        _produce(server.bootstrap, topic, 5, partition=0)
        deadline = time.monotonic() + 60
        while cleaned() != 5:  # a first pass, removing nothing
            assert time.monotonic() < deadline
            time.sleep(0.05)
        _earliest(server, group, lock_ms=60_000)
        tid = _topic_id(server, topic)
        a = ShareMember("127.0.0.1", server.port, group)
        b = ShareMember("127.0.0.1", server.port, group)
        try:
            a.join([topic])
            b.join([topic])
            got = acquired_offsets(a.fetch({tid: [0]}, max_records=5, max_wait_ms=5000))
            assert got == {(tid, 0): [(o, 1) for o in range(5)]}
            _produce(server.bootstrap, topic, 5, partition=0)  # the same keys: 0-4 go
            deadline = time.monotonic() + 60
            while cleaned() != 10:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            resp = a.acknowledge(
                {(tid, 0): [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 2, [REJECT])]}
            )
            assert resp.error_code == 0 and perrors(resp) == {(tid, 0): (0, 0)}
            got = acquired_offsets(b.fetch({tid: [0]}, max_records=10, max_wait_ms=5000))
            assert got == {(tid, 0): [(o, 1) for o in range(5, 10)]}
            assert _raw_offsets(server, group, topic)[0] == 3  # 3 and 4 still acquired by a
            resp = a.acknowledge({(tid, 0): [(3, 4, [ACCEPT])]})
            assert resp.error_code == 0 and perrors(resp) == {(tid, 0): (0, 0)}
            assert _raw_offsets(server, group, topic)[0] == 5
        finally:
            a.close()
            b.close()
    finally:
        stop_process(server.proc)


# -- assignment and whole-batch acquisition (Kafka 4.2) -------------------------------


def _assignment(resp: Any) -> set[tuple[uuid.UUID, int]]:
    return {(t.topic_id, p) for t in resp.assignment.topic_partitions for p in t.partitions}


def test_the_simple_assignor_spreads_partitions_over_members(skiff: Skiff) -> None:
    """Two members over 4 partitions get 2 each, disjoint; a third shares none (4 > 3),
    one leaving hands its partitions to the others. Heartbeats until the assignment
    settles, as a client does."""
    topic = f"share-t-{uuid.uuid4().hex[:10]}"
    _create(skiff.bootstrap, topic, partitions=4)
    tid = _topic_id(skiff, topic)
    group = _group()
    members = [ShareMember("127.0.0.1", skiff.port, group) for _ in range(3)]
    try:
        held: dict[str, set[tuple[uuid.UUID, int]]] = {}

        def settle(active: list[ShareMember]) -> dict[str, set[tuple[uuid.UUID, int]]]:
            end = time.monotonic() + 30
            while time.monotonic() < end:
                for m in active:
                    resp = m.heartbeat(m.member_epoch)
                    assert resp.error_code == 0, resp
                    if resp.assignment is not None:
                        held[m.member_id] = _assignment(resp)
                epochs = {m.member_epoch for m in active}
                if len(epochs) == 1 and all(m.member_id in held for m in active):
                    return {m.member_id: held[m.member_id] for m in active}
            raise AssertionError("assignment did not settle")

        a, b, c = members
        held[a.member_id] = _assignment(a.join([topic]))
        assert settle([a]) == {a.member_id: {(tid, p) for p in range(4)}}
        held[b.member_id] = _assignment(b.join([topic]))
        two = settle([a, b])
        assert [len(s) for s in two.values()] == [2, 2]
        assert two[a.member_id] | two[b.member_id] == {(tid, p) for p in range(4)}
        held[c.member_id] = _assignment(c.join([topic]))
        three = settle([a, b, c])
        assert sorted(len(s) for s in three.values()) == [1, 1, 2]
        assert set().union(*three.values()) == {(tid, p) for p in range(4)}
        assert sum(len(s) for s in three.values()) == 4  # no partition shared
        assert b.heartbeat(-1).error_code == 0
        back = settle([a, c])
        assert [len(s) for s in back.values()] == [2, 2]
        assert back[a.member_id] | back[c.member_id] == {(tid, p) for p in range(4)}
        # Sticky: what a and c kept is still theirs.
        assert three[a.member_id] <= back[a.member_id]
        assert three[c.member_id] <= back[c.member_id]
    finally:
        for m in members:
            m.close()


@pytest.mark.parametrize("fmt", ["record", "batch"])
def test_two_java_members_over_four_partitions_both_receive(skiff: Skiff, fmt: str) -> None:
    """Two KafkaShareConsumers over a 4-partition topic: each is assigned two
    partitions, both receive records, and every record is accepted exactly once.
    The members poll once both were given their two partitions. A member may still
    fetch under its earlier assignment (all four) for a moment: it applies a new one in
    its background thread, and a ShareFetch may acquire from any partition, with Kafka
    as with Skiff (the share-partition leader does not check assignments). So records
    go in rounds until a round reaches both members, each from its own partitions."""
    name = f"share-t-{uuid.uuid4().hex[:10]}"
    _create(skiff.bootstrap, name, partitions=4, fmt=fmt)
    group = _group()
    _earliest(skiff, group, lock_ms=30_000)
    per_round = 100
    seen: dict[str, list[tuple[int, int]]] = {"c0": [], "c1": []}
    lock = threading.Lock()
    joined = threading.Barrier(3)
    spread = threading.Event()
    done = threading.Event()
    failures: list[BaseException] = []

    def run(client: str) -> None:
        try:
            with ShareConsumer(skiff.bootstrap, group, [name], client_id=client) as c:
                c.poll(100)  # joins the group
                joined.wait(120)
                assert spread.wait(120)
                end = time.monotonic() + 180
                while not done.is_set() and time.monotonic() < end:
                    recs = c.poll(500)
                    if not recs:
                        continue
                    c.ack_all("accept")
                    assert not {k: v for k, v in c.commit().items() if v}
                    with lock:
                        seen[client].extend((r["partition"], r["offset"]) for r in recs)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)
            done.set()

    threads = [threading.Thread(target=run, args=(n,)) for n in seen]
    for t in threads:
        t.start()
    joined.wait(120)
    # Poll and produce once both members were given two partitions each (describe by
    # Kafka's Admin shows what each was given in a heartbeat answer).
    end = time.monotonic() + 60
    while True:
        [d] = java.admin(skiff.bootstrap, [{"op": "describe", "group": group}])
        sizes = sorted(len(m["assignment"]) for m in d.get("members", []))
        if sizes == [2, 2]:
            break
        assert time.monotonic() < end, d
    spread.set()
    produced = 0
    last_round: dict[str, set[int]] = {}
    try:
        deadline = time.monotonic() + 150
        while True:
            with lock:
                before = {k: len(v) for k, v in seen.items()}
            _produce(skiff.bootstrap, name, per_round, first=produced)
            produced += per_round
            while True:
                with lock:
                    got = sum(len(v) for v in seen.values())
                assert not failures, failures
                assert got <= produced, seen
                if got == produced:
                    break
                assert time.monotonic() < deadline, (produced, seen)
                time.sleep(0.05)
            with lock:
                last_round = {k: {p for p, _ in v[before[k] :]} for k, v in seen.items()}
            # Settled: both received in this round, each from its own partitions.
            if all(last_round.values()) and not last_round["c0"] & last_round["c1"]:
                break
            assert time.monotonic() < deadline, seen
    finally:
        done.set()
        for t in threads:
            t.join(180)
    assert not failures, failures
    everything = seen["c0"] + seen["c1"]
    assert len(everything) == produced and len(set(everything)) == produced
    assert last_round["c0"] and last_round["c1"]
    assert not last_round["c0"] & last_round["c1"], last_round


def _split_batches(data: bytes) -> list[bytes]:
    out = []
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
        out.append(data[pos : pos + size])
        pos += size
    return out


def test_share_fetch_on_a_batch_topic_returns_the_stored_batches(skiff: Skiff) -> None:
    """As Kafka: whole stored batches (MaxRecords is a soft limit), their bytes as Fetch
    serves them, and AcquiredRecords naming the acquired offsets; a released record
    comes back in its whole batch with only its own offsets acquired."""
    topic = f"share-t-{uuid.uuid4().hex[:10]}"
    _create(skiff.bootstrap, topic, fmt="batch")
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        for b in range(3):
            batch = build_batch([Rec(value=b"v%d" % (10 * b + i)) for i in range(10)])
            resp = kafka.request(0, 9, produce_request(topic, {0: batch}))
            assert resp.responses[0].partition_responses[0].base_offset == 10 * b
        stored = _split_batches(bytes(fetch(kafka, topic, 0).records))
    assert len(stored) == 3
    tid = _topic_id(skiff, topic)
    group = _group()
    _earliest(skiff, group, lock_ms=30_000)
    m = ShareMember("127.0.0.1", skiff.port, group)
    try:
        m.join([topic])

        def part(resp: Any) -> Any:
            assert resp.error_code == 0, resp
            [t] = resp.responses
            [p] = t.partitions
            assert p.error_code == 0, p
            return p

        p = part(m.fetch({tid: [0]}, max_records=5))
        assert bytes(p.records) == stored[0]
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [
            (0, 9, 1)
        ]
        p = part(m.fetch({tid: [0]}, max_records=15))
        assert bytes(p.records) == stored[1] + stored[2]
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [
            (10, 29, 1)
        ]
        # Release 3-4: they come back in batch 0, whole, with only 3-4 acquired.
        acks = {(tid, 0): [(0, 2, [ACCEPT]), (3, 4, [2]), (5, 29, [ACCEPT])]}
        p = part(m.fetch({tid: [0]}, acks=acks, max_records=100))
        assert p.acknowledge_error_code == 0
        assert bytes(p.records) == stored[0]
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [
            (3, 4, 2)
        ]
    finally:
        m.close()


@pytest.mark.parametrize("fmt", ["record", "batch"])
def test_share_partition_max_record_locks_caps_records_in_flight(
    own_redis: RedisServer, tmp_path: Path, fmt: str
) -> None:
    """group.share.partition.max.record.locks (here 15): a fetch acquires new records
    only while fewer are in flight (acquired, or released and not yet acquired again);
    re-acquiring released ones is not held back. On a `batch` topic the cap cuts a
    stored batch: it is sent whole with only the offsets under the cap acquired."""
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--group-share-partition-max-record-locks",
        "15",
    )
    try:
        topic, group = f"share-t-{uuid.uuid4().hex[:10]}", _group()
        _create(server.bootstrap, topic, fmt=fmt)
        with RawKafka("127.0.0.1", server.port) as kafka:
            for b in range(3):  # batches 0-9, 10-19, 20-29
                batch = build_batch([Rec(value=b"v%d" % (10 * b + i)) for i in range(10)])
                resp = kafka.request(0, 9, produce_request(topic, {0: batch}))
                assert resp.responses[0].partition_responses[0].base_offset == 10 * b
        _earliest(server, group, lock_ms=60_000)
        tid = _topic_id(server, topic)
        a = ShareMember("127.0.0.1", server.port, group)
        b = ShareMember("127.0.0.1", server.port, group)
        try:
            a.join([topic])
            b.join([topic])
            got = acquired_offsets(a.fetch({tid: [0]}, max_records=100))
            assert got == {(tid, 0): [(o, 1) for o in range(15)]}
            assert acquired_offsets(b.fetch({tid: [0]}, max_records=100)) == {}
            # 0-4 finished, 5-9 released: 10 in flight, room for 5 new ones.
            resp = a.acknowledge({(tid, 0): [(0, 4, [ACCEPT]), (5, 9, [RELEASE])]})
            assert resp.error_code == 0 and perrors(resp) == {(tid, 0): (0, 0)}
            got = acquired_offsets(b.fetch({tid: [0]}, max_records=100))
            assert got == {
                (tid, 0): [(o, 2) for o in range(5, 10)] + [(o, 1) for o in range(15, 20)]
            }
            assert acquired_offsets(a.fetch({tid: [0]}, max_records=100)) == {}
            assert _raw_offsets(server, group, topic) == (5, 25)
            # Everything in flight finished: the rest, 20-29, fits.
            resp = b.acknowledge({(tid, 0): [(5, 9, [ACCEPT]), (15, 19, [ACCEPT])]})
            assert resp.error_code == 0 and perrors(resp) == {(tid, 0): (0, 0)}
            resp = a.acknowledge({(tid, 0): [(10, 14, [ACCEPT])]})
            assert resp.error_code == 0 and perrors(resp) == {(tid, 0): (0, 0)}
            got = acquired_offsets(a.fetch({tid: [0]}, max_records=100))
            assert got == {(tid, 0): [(o, 1) for o in range(20, 30)]}
        finally:
            a.close()
            b.close()
    finally:
        stop_process(server.proc)


@BOTH
def test_share_fetch_with_max_bytes_zero_returns_no_records(skiff: Skiff, topic: str) -> None:
    tid = _topic_id(skiff, topic)
    _produce(skiff.bootstrap, topic, 5)
    group = _group()
    _earliest(skiff, group)
    m = ShareMember("127.0.0.1", skiff.port, group)
    try:
        m.join([topic])
        resp = m.fetch({tid: [0]}, max_bytes=0)
        assert resp.error_code == 0
        assert acquired_offsets(resp) == {}
        assert all(not p.records for t in resp.responses for p in t.partitions)
        # Nothing was acquired: the next fetch gets all five, first delivery.
        resp = m.fetch({tid: [0]})
        assert acquired_offsets(resp) == {(tid, 0): [(o, 1) for o in range(5)]}
    finally:
        m.close()


@BOTH
def test_delete_share_group_offsets_with_the_java_admin(skiff: Skiff, topic: str) -> None:
    """Kafka's Admin.deleteShareGroupOffsets: refused while the group has members,
    then the group's state on the topic is gone and consuming starts again at
    share.auto.offset.reset (earliest here)."""
    group = _group()
    _earliest(skiff, group, lock_ms=30_000)
    _produce(skiff.bootstrap, topic, 5)
    with ShareConsumer(skiff.bootstrap, group, [topic]) as c:
        assert [r["offset"] for r in _poll_until(c, 5)] == [0, 1, 2, 3, 4]
        c.ack_all("accept")
        assert c.commit() == {f"{topic}-0": None}
        [refused] = java.admin(
            skiff.bootstrap, [{"op": "delete_offsets", "group": group, "topics": [topic]}]
        )
        assert refused["error"] == "GroupNotEmptyException"
    deleted, offsets, unknown = java.admin(
        skiff.bootstrap,
        [
            {"op": "delete_offsets", "group": group, "topics": [topic]},
            {"op": "offsets", "group": group},
            {"op": "delete_offsets", "group": _group(), "topics": [topic]},
        ],
    )
    assert deleted == {"op": "delete_offsets", "ok": True}
    assert offsets["offsets"] == {}
    assert unknown["error"] == "GroupIdNotFoundException"
    with ShareConsumer(skiff.bootstrap, group, [topic]) as c:
        recs = _poll_until(c, 5)
        assert [(r["offset"], r["delivery_count"]) for r in recs] == [(o, 1) for o in range(5)]


def _group_configs(port: int, group: str) -> list[tuple[str, str, int]]:
    with RawKafka("127.0.0.1", port) as kafka:
        resp = kafka.request(
            32,
            4,
            {
                "resources": [
                    {"resource_type": 32, "resource_name": group, "configuration_keys": None}
                ],
                "include_synonyms": False,
                "include_documentation": False,
            },
        )
    [r] = resp.results
    assert r.error_code == 0
    return sorted((c.name, c.value, c.config_source) for c in r.configs)


def test_broker_group_share_configs_are_the_group_config_defaults(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """group.share.record.lock.duration.ms and group.share.delivery.count.limit (flags
    of the same names) are the defaults of groups that do not set their own; DELETE of
    a group config goes back to them."""
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        redis_server.url,
        "--group-share-record-lock-duration-ms",
        "20000",
        "--group-share-delivery-count-limit",
        "3",
    )
    try:
        group = _group()
        _configure(server, group, **{"share.delivery.count.limit": "7"})
        # a flag that differs from Kafka's default: a static broker config (4)
        assert [c for c in _group_configs(server.port, group) if c[2] != 5] == [
            ("share.delivery.count.limit", "7", 8),
            ("share.record.lock.duration.ms", "20000", 4),
        ]
        with RawKafka("127.0.0.1", server.port) as kafka:
            resp = kafka.request(
                44,
                1,
                {
                    "resources": [
                        {
                            "resource_type": 32,
                            "resource_name": group,
                            "configs": [
                                {
                                    "name": "share.delivery.count.limit",
                                    "config_operation": 1,
                                    "value": None,
                                }
                            ],
                        }
                    ],
                    "validate_only": False,
                },
            )
        assert [x.error_code for x in resp.responses] == [0]
        assert ("share.delivery.count.limit", "3", 4) in _group_configs(server.port, group)
        # The members are told the server's lock duration.
        m = ShareMember("127.0.0.1", server.port, group)
        try:
            topic = f"share-t-{uuid.uuid4().hex[:10]}"
            _create(server.bootstrap, topic)
            m.join([topic])
            resp = m.fetch({_topic_id(server, topic): [0]})
            assert resp.error_code == 0
            assert resp.acquisition_lock_timeout.total_seconds() == 20
        finally:
            m.close()
    finally:
        stop_process(server.proc)
