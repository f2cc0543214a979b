"""Kafka share groups (KIP-932) against Skiff, through real TCP: Kafka 4.2's
KafkaShareConsumer in explicit acknowledgement mode (tests/java-share), its
AdminClient, and raw ShareGroupHeartbeat / ShareFetch / ShareAcknowledge requests
(tests/share_raw.py) for the protocol's error answers."""

from __future__ import annotations

import threading
import time
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
from rawkafka import RawKafka, metadata_request
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


def _produce(bootstrap: str, topic: str, n: int, partition: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        kwargs: dict[str, Any] = {"value": f"v-{i}".encode(), "key": f"k-{i}".encode()}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
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
    _configure(
        skiff,
        group,
        **{
            "share.auto.offset.reset": "earliest",
            "share.record.lock.duration.ms": str(lock_ms),
            **more,
        },
    )


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
    _produce(skiff.bootstrap, topic, 4)
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
        assert sorted((c.name, c.value, c.config_source) for c in r.configs) == [
            ("errors.deadletterqueue.topic.name", "dl", 8),
            ("share.auto.offset.reset", "latest", 5),
            ("share.delivery.count.limit", "5", 5),
            ("share.record.lock.duration.ms", "45000", 8),
        ]
        bad = [
            ("no.such.config", "1", 40),  # INVALID_CONFIG
            ("share.record.lock.duration.ms", "10", 40),
            ("share.record.lock.duration.ms", "soon", 40),
            ("share.auto.offset.reset", "middle", 40),
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
