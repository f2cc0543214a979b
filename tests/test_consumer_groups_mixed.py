"""KIP-848 mixed groups: a classic group upgraded member by member to the consumer
protocol and back while its members consume and commit, with Kafka 4.x's Java
`VerifiableConsumer` (group.protocol classic and consumer in one group; it commits
synchronously after each poll, so every record must be processed exactly once across
the switches). ListGroups v5 shows the group's type at each step. The raw-protocol
tests check each step's answers: epochs, generations, assignment bytes, error codes."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import create, wait_for
from rawkafka import RawKafka
from test_consumer_groups_java import (
    DEADLINE_S,
    PARTITIONS,
    Consumer,
    _all_consumed,
    _exactly_once,
    _produce_round,
)
from test_consumer_groups_kip848 import Member as CgMember
from test_groups_protocol import (
    Broker,
    Member,
    assignment,
    create_topic,
    new_group,
    start_broker,
    wait_coordinator,
)

LIST_GROUPS, CG_DESCRIBE = 16, 69
NONE, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, GROUP_ID_NOT_FOUND = 0, 22, 27, 69
SESSION_MS = 6000
HEARTBEAT_MS = 500
CLASSIC_ARGS = ("--session-timeout", "10000")


@pytest.fixture
def cluster(own_redis: RedisServer, tmp_path: Path) -> Iterator[Skiff]:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--group-consumer-session-timeout-ms",
        str(SESSION_MS),
        "--group-consumer-heartbeat-interval-ms",
        str(HEARTBEAT_MS),
    )
    yield server
    stop_process(server.proc)


def _group_type(kafka: RawKafka, group: str) -> tuple[str, str] | None:
    """(type, protocol type) of the group in ListGroups v5."""
    resp = kafka.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    for g in resp.groups:
        if g.group_id == group:
            return g.group_type, g.protocol_type
    return None


def _partitioned(live: list[Consumer]) -> bool:
    """Every partition held by exactly one live member, each member holding some."""
    held = [c.assigned() for c in live]
    return (
        all(held)
        and sum(len(h) for h in held) == PARTITIONS
        and set().union(*held) == set(range(PARTITIONS))
    )


@pytest.mark.parametrize("assignor", ["RangeAssignor", "CooperativeStickyAssignor"])
def test_classic_group_upgraded_and_downgraded_while_consuming(
    cluster: Skiff, tmp_path: Path, assignor: str
) -> None:
    """Classic members with an eager (range) or a cooperative client-side assignor."""
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    everyone: list[Consumer] = []
    strategy = ("--assignment-strategy", f"org.apache.kafka.clients.consumer.{assignor}")

    def start(name: str, protocol: str) -> Consumer:
        extra = (*CLASSIC_ARGS, *strategy) if protocol == "classic" else ()
        c = Consumer(cluster.bootstrap, topic, group, tmp_path / f"{name}.log", protocol, extra)
        everyone.append(c)
        return c

    with RawKafka("127.0.0.1", cluster.port) as kafka:
        create(kafka, topic, partitions=PARTITIONS)
        rounds = 0

        def consume_round(live: list[Consumer], what: str) -> None:
            nonlocal rounds
            wait_for(lambda: _partitioned(live), DEADLINE_S, f"{what}: partitions shared")
            rounds += 1
            _produce_round(kafka, topic, 30, f"r{rounds}")
            wait_for(lambda: _all_consumed(everyone, 30 * rounds), DEADLINE_S, f"{what}: records")

        try:
            c1, c2 = start("c1", "classic"), start("c2", "classic")
            consume_round([c1, c2], "two classic members")
            assert _group_type(kafka, group) == ("classic", "consumer")
            # Upgrade, member by member: a consumer-protocol member converts the group.
            k1 = start("k1", "consumer")
            consume_round([c1, c2, k1], "classic + consumer")
            assert _group_type(kafka, group) == ("consumer", "consumer")
            c1.stop()
            consume_round([c2, k1], "c1 replaced")
            k2 = start("k2", "consumer")
            c2.stop()
            consume_round([k1, k2], "all consumer protocol")
            # And back: classic members join, the last consumer-protocol member leaves.
            c3 = start("c3", "classic")
            k1.stop()
            consume_round([k2, c3], "k1 replaced")
            c4 = start("c4", "classic")
            consume_round([k2, c3, c4], "two classic members join")
            k2.stop()
            consume_round([c3, c4], "downgraded")
            assert _group_type(kafka, group) == ("classic", "consumer")
            _exactly_once(everyone, 30 * rounds)
        finally:
            for c in everyone:
                c.stop()


def _raw_group_type(b: Broker, group: str) -> tuple[str, str] | None:
    with b.connect() as kafka:
        return _group_type(kafka, group)


@pytest.fixture
def raw_broker(own_redis: RedisServer, tmp_path: Path) -> Iterator[Broker]:
    b, server = start_broker(own_redis, tmp_path / "skiff.log")
    wait_coordinator(b)
    yield b
    stop_process(server.proc)


def test_classic_member_through_upgrade_and_downgrade(raw_broker: Broker) -> None:
    b = raw_broker
    topic, group = f"t-{uuid.uuid4().hex[:8]}", new_group()
    create_topic(b, topic, 2)
    a = Member(b, group, topic)
    with b.connect() as kafka:
        try:
            resp = a.join_new()
            assert (resp.generation_id, resp.leader) == (1, a.member_id)
            assert a.sync(assignments={a.member_id: assignment(topic, [0, 1])}).error_code == NONE
            assert _raw_group_type(b, group) == ("classic", "consumer")
            # A consumer-protocol member converts the group: group epoch = generation + 1;
            # A still holds both partitions, so B gets none yet.
            k = CgMember(kafka, group, [topic])
            resp = k.heartbeat()
            assert (resp.error_code, resp.member_epoch, k.partitions()) == (NONE, 2, [])
            assert _raw_group_type(b, group) == ("consumer", "consumer")
            # A is told to rejoin; until then it commits at its generation (epoch 1).
            assert a.heartbeat() == REBALANCE_IN_PROGRESS
            assert a.commit({topic: {0: 5}}) == {(topic, 0): NONE}
            resp = a.join()
            assert (resp.error_code, resp.generation_id, resp.leader, resp.members) == (
                NONE,
                2,
                "",
                (),
            )
            assert (resp.protocol_type, resp.protocol_name) == ("consumer", "range")
            resp = a.sync()
            assert (resp.error_code, resp.assignment) == (NONE, assignment(topic, [0]))
            assert a.heartbeat() == NONE
            body = {"group_ids": [group], "include_authorized_operations": False}
            [d] = kafka.request(CG_DESCRIBE, 1, body).groups
            assert {m.member_id: (m.member_type, m.member_epoch) for m in d.members} == {
                a.member_id: (0, 2),  # classic
                k.member_id: (1, 2),
            }
            assert a.commit({topic: {0: 6}}, generation_id_or_member_epoch=1) == {
                (topic, 0): ILLEGAL_GENERATION
            }
            assert a.commit({topic: {0: 6}}, version=8) == {(topic, 0): NONE}  # any version
            # A released partition 1: B takes it.
            resp = k.heartbeat()
            assert (resp.error_code, resp.member_epoch, k.partitions()) == (NONE, 2, [1])
            # The last consumer-protocol member leaves: classic again, at generation =
            # group epoch (3), rebalancing; A's epoch stays valid until it rejoins.
            assert k.heartbeat(epoch=-1).error_code == NONE
            assert _raw_group_type(b, group) == ("classic", "consumer")
            assert a.heartbeat() == REBALANCE_IN_PROGRESS
            resp = a.join()
            assert (resp.error_code, resp.generation_id, resp.leader) == (NONE, 4, a.member_id)
            assert [m.member_id for m in resp.members] == [a.member_id]
            resp = a.sync(assignments={a.member_id: assignment(topic, [0, 1])})
            assert (resp.error_code, resp.assignment) == (NONE, assignment(topic, [0, 1]))
            assert a.heartbeat() == NONE
        finally:
            a.close()


def test_groups_that_cannot_be_upgraded(own_redis: RedisServer, tmp_path: Path) -> None:
    b, server = start_broker(
        own_redis, tmp_path / "skiff.log", SKIFF_GROUP_CONSUMER_MIGRATION_POLICY="downgrade"
    )
    try:
        wait_coordinator(b)
        topic = f"t-{uuid.uuid4().hex[:8]}"
        create_topic(b, topic, 1)
        connect, classic = new_group(), new_group()
        c = Member(b, connect, topic, protocol_type="connect", protocols=[("default", b"x")])
        m = Member(b, classic, topic)
        with b.connect() as kafka:
            try:
                c.join_new()
                assert c.sync(assignments={c.member_id: b"y"}).error_code == NONE
                resp = CgMember(kafka, connect, [topic]).heartbeat()
                assert (resp.error_code, resp.error_message) == (
                    GROUP_ID_NOT_FOUND,
                    f"Group {connect} is not a consumer group.",
                )
                m.join_new()
                assert m.sync(assignments={m.member_id: assignment(topic, [0])}).error_code == NONE
                resp = CgMember(kafka, classic, [topic]).heartbeat()
                assert (resp.error_code, resp.error_message) == (
                    GROUP_ID_NOT_FOUND,
                    f"Cannot upgrade classic group {classic} to consumer group"
                    " because the online upgrade is disabled.",
                )
                assert m.heartbeat() == NONE  # the classic group carries on
            finally:
                c.close()
                m.close()
    finally:
        stop_process(server.proc)


def test_a_mixed_group_survives_a_coordinator_move(own_redis: RedisServer, tmp_path: Path) -> None:
    b, server = start_broker(own_redis, tmp_path / "one.log")
    try:
        wait_coordinator(b)
        topic, group = f"t-{uuid.uuid4().hex[:8]}", new_group()
        create_topic(b, topic, 2)
        a = Member(b, group, topic)
        with b.connect() as kafka:
            try:
                a.join_new()
                assert a.sync(assignments={a.member_id: assignment(topic, [0, 1])}).error_code == 0
                k = CgMember(kafka, group, [topic])
                assert k.heartbeat().member_epoch == 2
                assert a.heartbeat() == REBALANCE_IN_PROGRESS
                assert (a.join().generation_id, a.sync().assignment) == (
                    2,
                    assignment(topic, [0]),
                )
            finally:
                a.close()
    finally:
        stop_process(server.proc)  # SIGTERM: its leases are released
    b2, server = start_broker(own_redis, tmp_path / "two.log")
    try:
        wait_coordinator(b2)
        moved = Member(b2, group, topic)
        moved.member_id, moved.generation = a.member_id, 2
        try:
            # The classic member carries on at its epoch on the new coordinator.
            assert moved.heartbeat() == NONE
            resp = moved.sync()
            assert (resp.error_code, resp.assignment) == (NONE, assignment(topic, [0]))
            assert _raw_group_type(b2, group) == ("consumer", "consumer")
        finally:
            moved.close()
    finally:
        stop_process(server.proc)


def test_librdkafka_classic_and_consumer_members_in_one_group(cluster: Skiff) -> None:
    """confluent-kafka (librdkafka): the same upgrade and downgrade, committing each
    record synchronously; every record consumed exactly once."""
    from confluent_kafka import Consumer as RdConsumer

    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    seen: list[tuple[int, int]] = []
    live: list[Any] = []

    def member(protocol: str) -> Any:
        conf: dict[str, Any] = {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        if protocol == "classic":
            conf["session.timeout.ms"] = 10_000
        c = RdConsumer(conf)
        c.subscribe([topic])
        live.append(c)
        return c

    def leave(c: Any) -> None:
        live.remove(c)
        c.close()

    def until(check: Any, what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            for c in list(live):
                msg = c.poll(0.05)
                if msg is not None and msg.error() is None:
                    seen.append((msg.partition(), msg.offset()))
                    c.commit(message=msg, asynchronous=False)

    def shared() -> bool:
        held = [{tp.partition for tp in c.assignment()} for c in live]
        return all(held) and sorted(p for h in held for p in h) == list(range(PARTITIONS))

    rounds = 0

    def consume_round(what: str) -> None:
        nonlocal rounds
        until(shared, f"{what}: partitions shared")
        rounds += 1
        with RawKafka("127.0.0.1", cluster.port) as kafka:
            _produce_round(kafka, topic, 20, f"r{rounds}")
        until(lambda: len(seen) >= 20 * rounds * PARTITIONS, f"{what}: records")

    with RawKafka("127.0.0.1", cluster.port) as kafka:
        create(kafka, topic, partitions=PARTITIONS)
    try:
        c1, c2 = member("classic"), member("classic")
        consume_round("two classic members")
        k1 = member("consumer")
        consume_round("classic + consumer")
        leave(c1)
        k2 = member("consumer")
        leave(c2)
        consume_round("all consumer protocol")
        member("classic")
        leave(k1)
        consume_round("k1 replaced")
        member("classic")
        leave(k2)
        consume_round("downgraded")
        with RawKafka("127.0.0.1", cluster.port) as kafka:
            assert _group_type(kafka, group) == ("classic", "consumer")
        counts = Counter(seen)
        assert not [r for r, n in counts.items() if n > 1]
        assert set(counts) == {(p, o) for p in range(PARTITIONS) for o in range(20 * rounds)}
    finally:
        for c in live:
            c.close()
