"""Classic consumer-group APIs spoken raw (tests/rawkafka.py), asserting what Apache Kafka
4.4 answers (3.9.1 for the versions 4.4 dropped): FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups and OffsetDelete. Kafka's answers are pinned by the group scenarios of
tools/kafka_reference.

GROUPS_TEST_BOOTSTRAP=127.0.0.1:9092 runs the tests against another broker (a Kafka with
group.initial.rebalance.delay.ms=0); the tests that need Skiff's settings are then skipped.
"""

from __future__ import annotations

import os
import re
import struct
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import RedisServer, start_redis, start_skiff, stop_process
from rawkafka import ConnectionClosed, RawKafka

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT = 8, 9, 10, 11, 12
LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 13, 14, 15, 16
DELETE_GROUPS, OFFSET_DELETE, CREATE_TOPICS, METADATA = 42, 47, 19, 3
DELETE_TOPICS = 20

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNKNOWN_TOPIC_ID = 100

UNSET_OPERATIONS = -(2**31)  # authorized_operations when not asked for
# READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka 4.2 without an
# authorizer reports (3.9 reported 328, without the config operations)
GROUP_OPERATIONS = 3400
SESSION_MS = 30_000
CLIENT_ID = "rawkafka"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
EXTERNAL = os.environ.get("GROUPS_TEST_BOOTSTRAP")
skiff_only = pytest.mark.skipif(EXTERNAL is not None, reason="needs Skiff's group settings")


@dataclass(frozen=True)
class Broker:
    host: str
    port: int

    def connect(self) -> RawKafka:
        return RawKafka(self.host, self.port, client_id=CLIENT_ID)

    def ask(self, api_key: int, version: int, body: Any) -> Any:
        with self.connect() as kafka:
            return kafka.request(api_key, version, body)


def start_broker(redis_server: RedisServer, log: Path, **env: str) -> tuple[Broker, Any]:
    server = start_skiff(
        log,
        "--redis-url",
        redis_server.url,
        env={"SKIFF_GROUP_INITIAL_REBALANCE_DELAY_MS": "0", **env},
    )
    return Broker("127.0.0.1", server.port), server


@pytest.fixture(scope="module")
def module_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A Redis of this module's own: other tests' sidecars on the shared Redis would be
    live brokers too, and coordinate some of the groups here."""
    server = start_redis(tmp_path_factory.mktemp("groups-redis"))
    yield server
    stop_process(server.proc)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path / "redis")
    yield server
    stop_process(server.proc)


@pytest.fixture(scope="module")
def broker(module_redis: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    if EXTERNAL:
        host, port = EXTERNAL.rsplit(":", 1)
        yield Broker(host, int(port))
        return
    b, server = start_broker(module_redis, tmp_path_factory.mktemp("groups") / "skiff.log")
    yield b
    stop_process(server.proc)


@dataclass(frozen=True)
class Topics:
    grp: str  # 2 partitions: what members subscribe to
    other: str  # 1 partition


def create_topic(b: Broker, name: str, partitions: int) -> None:
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        "timeout": 30_000,
        "validate_only": False,
    }
    assert b.ask(CREATE_TOPICS, 7, body).topics[0].error_code == NONE
    deadline = time.monotonic() + 20
    while True:  # Kafka leads new partitions a moment later
        meta = {"topics": [{"name": name}], "allow_auto_topic_creation": False}
        [t] = b.ask(METADATA, 12, meta).topics
        if len(t.partitions) == partitions and all(p.leader_id >= 0 for p in t.partitions):
            return
        assert time.monotonic() < deadline, t
        time.sleep(0.1)


def wait_coordinator(b: Broker) -> None:
    """Kafka answers COORDINATOR_NOT_AVAILABLE until __consumer_offsets is loaded."""
    deadline = time.monotonic() + 30
    while b.ask(FIND_COORDINATOR, 3, {"key": "probe", "key_type": 0}).error_code != NONE:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    while b.ask(LIST_GROUPS, 4, {"states_filter": []}).error_code != NONE:
        assert time.monotonic() < deadline
        time.sleep(0.2)


@pytest.fixture(scope="module")
def topics(broker: Broker) -> Topics:
    wait_coordinator(broker)
    made = Topics(f"grp-{uuid.uuid4().hex[:10]}", f"oth-{uuid.uuid4().hex[:10]}")
    create_topic(broker, made.grp, 2)
    create_topic(broker, made.other, 1)
    return made


def new_group(prefix: str = "g") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# -- consumer protocol blobs ---------------------------------------------------------------


def subscription(*names: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, [topic], user data (null)."""
    out = struct.pack(">hi", 0, len(names))
    for name in names:
        out += struct.pack(">h", len(name)) + name.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: version, [topic, [partition]], user data (null)."""
    out = struct.pack(">hih", 0, 1, len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


# -- members -------------------------------------------------------------------------------


class Member:
    """One member on its own connection: a JoinGroup waiting for a rebalance can be sent
    and its answer read later."""

    def __init__(
        self,
        b: Broker,
        group: str,
        topic: str,
        instance_id: str | None = None,
        protocol_type: str = "consumer",
        protocols: list[tuple[str, bytes]] | None = None,
    ) -> None:
        self.broker, self.group, self.instance_id = b, group, instance_id
        self.kafka = b.connect()
        self.protocol_type = protocol_type
        self.protocols = protocols or [("range", subscription(topic))]
        self.member_id = ""
        self.generation = -1
        self._join_version = 9

    def close(self) -> None:
        self.kafka.close()

    def send_join(self, version: int = 9, **changes: Any) -> None:
        self._join_version = version
        body = {
            "group_id": self.group,
            "session_timeout": SESSION_MS,
            "rebalance_timeout": 10_000,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in self.protocols],
            **changes,
        }
        self.kafka.send(JOIN_GROUP, version, body)

    def joined(self) -> Any:
        resp = self.kafka.recv(JOIN_GROUP, self._join_version)
        if resp.error_code in (NONE, MEMBER_ID_REQUIRED):
            self.member_id = resp.member_id
        if resp.error_code == NONE:
            self.generation = resp.generation_id
        return resp

    def join(self, version: int = 9, **changes: Any) -> Any:
        self.send_join(version, **changes)
        return self.joined()

    def join_new(self, version: int = 9) -> Any:
        """Joins; v4+ without an instance id first gets MEMBER_ID_REQUIRED."""
        resp = self.join(version)
        if version >= 4 and self.instance_id is None:
            assert resp.error_code == MEMBER_ID_REQUIRED, resp
            resp = self.join(version)
        assert resp.error_code == NONE, resp
        return resp

    def sync_body(self, assignments: dict[str, bytes] | None, **changes: Any) -> dict[str, Any]:
        return {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocol_name": self.protocols[0][0],
            "assignments": [
                {"member_id": m, "assignment": a} for m, a in (assignments or {}).items()
            ],
            **changes,
        }

    def sync(
        self, version: int = 5, assignments: dict[str, bytes] | None = None, **changes: Any
    ) -> Any:
        return self.kafka.request(SYNC_GROUP, version, self.sync_body(assignments, **changes))

    def heartbeat(self, version: int = 4, **changes: Any) -> int:
        body = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            **changes,
        }
        return int(self.broker.ask(HEARTBEAT, version, body).error_code)

    def commit(self, offsets: dict[str, dict[int, int]], version: int = 9, **changes: Any) -> Any:
        ids = topic_ids(self.broker, offsets) if version >= 10 else None
        body = commit_body(
            self.group, offsets, self.generation, self.member_id, self.instance_id, ids=ids
        )
        return commit_errors(self.broker.ask(OFFSET_COMMIT, version, {**body, **changes}), ids)


@pytest.fixture
def members() -> Iterator[list[Member]]:
    made: list[Member] = []
    yield made
    for m in made:
        m.close()


def describe(b: Broker, group: str, version: int = 5, authorized: bool = False) -> Any:
    body = {"groups": [group], "include_authorized_operations": authorized}
    [found] = b.ask(DESCRIBE_GROUPS, version, body).groups
    return found


def state(b: Broker, group: str) -> str:
    return str(describe(b, group).group_state)


def wait_state(b: Broker, group: str, wanted: str) -> None:
    deadline = time.monotonic() + 10
    while (current := state(b, group)) != wanted:
        assert time.monotonic() < deadline, current
        time.sleep(0.02)


def form_group(
    b: Broker,
    made: list[Member],
    topic: str,
    n: int = 1,
    join_version: int = 9,
    sync_version: int = 5,
    group: str | None = None,
    **kwargs: Any,
) -> list[Member]:
    """A Stable group of n members; the first leads. The first joins and syncs alone
    (generation 1); each later one joins, the group starts a rebalance, the members already
    in rejoin, and the leader syncs every member's assignment (partition i % 2)."""
    group = group or new_group()
    out: list[Member] = []
    for _ in range(n):
        new = Member(b, group, topic, **kwargs)
        made.append(new)
        if out:
            if join_version >= 4 and new.instance_id is None:
                assert new.join(join_version).error_code == MEMBER_ID_REQUIRED
            new.send_join(join_version)
            wait_state(b, group, "PreparingRebalance")
            for m in out:
                m.send_join(join_version)
            for m in [new, *out]:
                assert m.joined().error_code == NONE
        else:
            new.join_new(join_version)
        out.append(new)
        for m in out[1:]:
            m.kafka.send(SYNC_GROUP, sync_version, m.sync_body(None))
        plan = {m.member_id: assignment(topic, [j % 2]) for j, m in enumerate(out)}
        assert out[0].sync(sync_version, plan).error_code == NONE
        for m in out[1:]:
            assert m.kafka.recv(SYNC_GROUP, sync_version).error_code == NONE
    return out


# -- offsets -------------------------------------------------------------------------------


def topic_ids(b: Broker, names: Iterable[str] | None = None) -> dict[str, uuid.UUID]:
    """Topic name -> id (Metadata v12), for OffsetCommit/OffsetFetch v10, which name
    topics by id. names: those topics, a topic that does not exist getting a fresh random
    id (one no topic has); None: every topic."""
    listed = None if names is None else list(names)
    asked = None if listed is None else [{"name": n, "topic_id": None} for n in listed]
    meta = b.ask(METADATA, 12, {"topics": asked, "allow_auto_topic_creation": False})
    ids = {t.name: t.topic_id for t in meta.topics if t.error_code == NONE and t.topic_id}
    return ids if listed is None else {n: ids.get(n) or uuid.uuid4() for n in listed}


def topic_name(topic: Any, ids: dict[str, uuid.UUID] | None) -> str:
    """An answer's topic by name: its name up to v9, the name its id stands for in `ids`
    from v10."""
    if hasattr(topic, "name"):
        return str(topic.name)
    return next(n for n, i in (ids or {}).items() if i == topic.topic_id)


def commit_body(
    group: str,
    offsets: dict[str, dict[int, Any]],
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str | None = "meta",
    retention_ms: int = -1,
    ids: dict[str, uuid.UUID] | None = None,
) -> dict[str, Any]:
    """offsets: topic -> partition -> offset, or (offset, metadata); ids: topic -> id, for
    v10 (each version keeps the field it has: name up to v9, topic_id from v10)."""
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "retention_time": retention_ms,
        "topics": [
            {
                "name": t,
                "topic_id": (ids or {}).get(t),
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o[0] if isinstance(o, tuple) else o,
                        "committed_leader_epoch": -1,
                        "committed_metadata": o[1] if isinstance(o, tuple) else metadata,
                    }
                    for p, o in parts.items()
                ],
            }
            for t, parts in offsets.items()
        ],
    }


def commit_errors(resp: Any, ids: dict[str, uuid.UUID] | None = None) -> dict[tuple[str, int], int]:
    return {
        (topic_name(t, ids), p.partition_index): p.error_code
        for t in resp.topics
        for p in t.partitions
    }


def commit(
    b: Broker, group: str, offsets: dict[str, dict[int, Any]], version: int = 9, **kwargs: Any
) -> dict[tuple[str, int], int]:
    """From v10 the topics go by id (a topic that does not exist: an id no topic has)."""
    ids = topic_ids(b, offsets) if version >= 10 else None
    body = commit_body(group, offsets, ids=ids, **kwargs)
    return commit_errors(b.ask(OFFSET_COMMIT, version, body), ids)


def fetch_body(
    group: str,
    wanted: dict[str, list[int]] | None,
    stable: bool = False,
    ids: dict[str, uuid.UUID] | None = None,
) -> Any:
    named = (
        None
        if wanted is None
        else [
            {"name": t, "topic_id": (ids or {}).get(t), "partition_indexes": ps}
            for t, ps in wanted.items()
        ]
    )
    return {
        "group_id": group,
        "topics": named,
        "groups": [{"group_id": group, "topics": named}],
        "require_stable": stable,
    }


Offsets = dict[tuple[str, int], tuple[int, str | None, int]]


def fetched(
    b: Broker, group: str, wanted: dict[str, list[int]] | None = None, version: int = 8
) -> Offsets:
    """(topic, partition) -> (offset, metadata, error) as OffsetFetch answers; the group's
    and the response's error codes must be NONE. From v10 the topics go by id."""
    ids = topic_ids(b, wanted) if version >= 10 else None
    resp = b.ask(OFFSET_FETCH, version, fetch_body(group, wanted, ids=ids))
    if version >= 8:
        [g] = resp.groups
        assert (g.group_id, g.error_code) == (group, NONE)
        topics = g.topics
    else:
        assert getattr(resp, "error_code", NONE) == NONE
        topics = resp.topics
    return {
        (topic_name(t, ids), p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in topics
        for p in t.partitions
    }


# -- FindCoordinator -----------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@pytest.mark.parametrize("key", ["some-group", ""])
def test_find_coordinator_group(broker: Broker, topics: Topics, version: int, key: str) -> None:
    resp = broker.ask(FIND_COORDINATOR, version, {"key": key, "key_type": 0})
    assert resp.error_code == NONE
    assert resp.node_id >= 0 and (resp.host, resp.port) == (broker.host, broker.port)


@pytest.mark.parametrize("version", [1, 3])
def test_find_coordinator_transaction_and_invalid_type(broker: Broker, version: int) -> None:
    deadline = time.monotonic() + 15
    while (resp := broker.ask(FIND_COORDINATOR, version, {"key": "tx", "key_type": 1})).error_code:
        assert resp.error_code in (14, 15) and time.monotonic() < deadline, resp
        time.sleep(0.2)
    assert (resp.host, resp.port) == (broker.host, broker.port)
    bad = broker.ask(FIND_COORDINATOR, version, {"key": "g", "key_type": 7})
    assert (bad.error_code, bad.node_id, bad.host, bad.port) == (INVALID_REQUEST, -1, "", -1)


def test_find_coordinator_batched(broker: Broker, topics: Topics) -> None:
    resp = broker.ask(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b", ""]})
    assert [c.key for c in resp.coordinators] == ["a", "b", ""]
    for c in resp.coordinators:
        assert (c.error_code, c.host, c.port) == (NONE, broker.host, broker.port)
        assert c.node_id >= 0
    bad = broker.ask(FIND_COORDINATOR, 4, {"key_type": 7, "coordinator_keys": ["a"]})
    [c] = bad.coordinators
    assert (c.key, c.error_code, c.node_id, c.host, c.port) == ("a", INVALID_REQUEST, -1, "", -1)
    assert (
        broker.ask(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": []}).coordinators == ()
    )


# -- JoinGroup -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 6, 7, 9])
def test_join_member_id_required_then_join(
    broker: Broker, topics: Topics, members: list[Member], version: int
) -> None:
    a = Member(broker, new_group(), topics.grp)
    members.append(a)
    first = a.join(version)
    assert first.error_code == MEMBER_ID_REQUIRED
    assert re.fullmatch(f"{CLIENT_ID}-{UUID}", first.member_id), first.member_id
    assert (first.generation_id, first.leader, first.members) == (-1, "", ())
    if version >= 7:
        assert (first.protocol_type, first.protocol_name) == (None, None)
    resp = a.join(version)
    assert resp.error_code == NONE
    assert (resp.generation_id, resp.leader, resp.member_id) == (
        1,
        first.member_id,
        first.member_id,
    )
    assert resp.protocol_name == "range"
    if version >= 7:
        assert resp.protocol_type == "consumer"
    assert [(m.member_id, m.metadata) for m in resp.members] == [
        (a.member_id, subscription(topics.grp))
    ]
    d = describe(broker, a.group)
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (
        NONE,
        "CompletingRebalance",
        "consumer",
        "",
    )
    [m] = d.members
    assert (m.member_id, m.client_id, m.client_host) == (a.member_id, CLIENT_ID, "/127.0.0.1")
    assert (m.member_metadata, m.member_assignment) == (b"", b"")


@pytest.mark.parametrize("version", [0, 1, 3])
def test_join_v0_to_v3_needs_no_member_id(
    broker: Broker, topics: Topics, members: list[Member], version: int
) -> None:
    a = Member(broker, new_group(), topics.grp)
    members.append(a)
    resp = a.join(version)
    assert (resp.error_code, resp.generation_id, resp.leader) == (NONE, 1, resp.member_id)
    assert re.fullmatch(f"{CLIENT_ID}-{UUID}", resp.member_id)


@pytest.mark.parametrize("version", [5, 9])
def test_static_member_joins_at_once(
    broker: Broker, topics: Topics, members: list[Member], version: int
) -> None:
    a = Member(broker, new_group(), topics.grp, instance_id="static-1")
    members.append(a)
    resp = a.join(version)
    assert (resp.error_code, resp.generation_id, resp.leader) == (NONE, 1, resp.member_id)
    assert re.fullmatch(f"static-1-{UUID}", resp.member_id)
    assert [m.group_instance_id for m in resp.members] == ["static-1"]
    assert [m.group_instance_id for m in describe(broker, a.group).members] == ["static-1"]


@pytest.mark.parametrize(
    ("version", "timeout_ms", "error"),
    [
        (1, 5999, INVALID_SESSION_TIMEOUT),
        (5, 5999, INVALID_SESSION_TIMEOUT),
        (9, 5999, INVALID_SESSION_TIMEOUT),
        (9, 1_800_001, INVALID_SESSION_TIMEOUT),
        (9, 6000, MEMBER_ID_REQUIRED),
    ],
)
def test_join_session_timeout_bounds(
    broker: Broker,
    topics: Topics,
    members: list[Member],
    version: int,
    timeout_ms: int,
    error: int,
) -> None:
    a = Member(broker, new_group(), topics.grp)
    members.append(a)
    resp = a.join(version, session_timeout=timeout_ms)
    assert (resp.error_code, resp.generation_id) == (error, -1)
    # a refused join leaves no group behind; a pending member leaves it Empty
    assert state(broker, a.group) == ("Empty" if error == MEMBER_ID_REQUIRED else "Dead")
    if error != MEMBER_ID_REQUIRED:
        assert resp.member_id == ""


@pytest.mark.parametrize("version", [0, 9])
def test_join_empty_group_id(
    broker: Broker, topics: Topics, members: list[Member], version: int
) -> None:
    a = Member(broker, "", topics.grp)
    members.append(a)
    resp = a.join(version)
    assert (resp.error_code, resp.member_id, resp.generation_id) == (INVALID_GROUP_ID, "", -1)


@pytest.mark.parametrize(
    "changes", [{"protocol_type": ""}, {"protocols": []}], ids=["no_protocol_type", "no_protocols"]
)
def test_join_new_group_without_protocols(
    broker: Broker, topics: Topics, members: list[Member], changes: dict[str, Any]
) -> None:
    a = Member(broker, new_group(), topics.grp)
    members.append(a)
    resp = a.join(9, **changes)
    assert (resp.error_code, resp.member_id) == (INCONSISTENT_GROUP_PROTOCOL, "")
    d = describe(broker, a.group)
    assert (d.group_state, d.members) == ("Empty", ())


@pytest.mark.parametrize(
    ("version", "changes"),
    [
        (9, {"protocol_type": "connect"}),
        (3, {"protocol_type": "connect"}),
        (9, {"protocols": [{"name": "roundrobin", "metadata": b""}]}),
    ],
    ids=["type_v9", "type_v3", "no_common_protocol"],
)
def test_join_inconsistent_protocol_leaves_group_alone(
    broker: Broker, topics: Topics, members: list[Member], version: int, changes: dict[str, Any]
) -> None:
    [a] = form_group(broker, members, topics.grp)
    before = describe(broker, a.group)
    b = Member(broker, a.group, topics.grp)
    members.append(b)
    resp = b.join(version, **changes)
    assert (resp.error_code, resp.member_id, resp.generation_id) == (
        INCONSISTENT_GROUP_PROTOCOL,
        "",
        -1,
    )
    assert describe(broker, a.group) == before
    assert a.heartbeat() == NONE


def test_join_unknown_member_id(broker: Broker, topics: Topics, members: list[Member]) -> None:
    lone = Member(broker, new_group(), topics.grp)
    members.append(lone)
    resp = lone.join(9, member_id="nobody")
    assert (resp.error_code, resp.member_id) == (UNKNOWN_MEMBER_ID, "nobody")
    assert state(broker, lone.group) == "Dead"
    [a] = form_group(broker, members, topics.grp)
    before = describe(broker, a.group)
    b = Member(broker, a.group, topics.grp)
    members.append(b)
    assert b.join(9, member_id="nobody").error_code == UNKNOWN_MEMBER_ID
    assert describe(broker, a.group) == before


def test_leader_rejoin_starts_next_generation(
    broker: Broker, topics: Topics, members: list[Member]
) -> None:
    [a] = form_group(broker, members, topics.grp)
    resp = a.join(9)
    assert (resp.error_code, resp.generation_id, resp.leader) == (NONE, 2, a.member_id)
    assert [m.member_id for m in resp.members] == [a.member_id]
    assert state(broker, a.group) == "CompletingRebalance"


# -- a whole round, and SyncGroup ----------------------------------------------------------


@pytest.mark.parametrize(("join_version", "sync_version"), [(0, 0), (2, 1), (5, 3), (6, 4), (9, 5)])
def test_join_and_sync_round(
    broker: Broker, topics: Topics, members: list[Member], join_version: int, sync_version: int
) -> None:
    group = new_group()
    a, b = Member(broker, group, topics.grp), Member(broker, group, topics.grp)
    members += [a, b]
    first = a.join_new(join_version)
    assert (first.generation_id, first.leader) == (1, a.member_id)
    alone = a.sync(sync_version, {a.member_id: b"solo"})
    assert (alone.error_code, alone.assignment) == (NONE, b"solo")
    assert state(broker, group) == "Stable"

    if join_version >= 4:
        assert b.join(join_version).error_code == MEMBER_ID_REQUIRED
        assert state(broker, group) == "Stable"  # a pending member does not rebalance
    b.send_join(join_version)
    wait_state(broker, group, "PreparingRebalance")
    a.send_join(join_version)
    leader, follower = a.joined(), b.joined()
    for resp in (leader, follower):
        assert (resp.error_code, resp.generation_id, resp.leader) == (NONE, 2, a.member_id)
        assert resp.protocol_name == "range"
        if join_version >= 7:
            assert resp.protocol_type == "consumer"
    assert b.member_id != a.member_id
    assert sorted((m.member_id, m.metadata) for m in leader.members) == sorted(
        [(a.member_id, subscription(topics.grp)), (b.member_id, subscription(topics.grp))]
    )
    assert follower.members == ()
    assert state(broker, group) == "CompletingRebalance"

    plan = {a.member_id: assignment(topics.grp, [0]), b.member_id: assignment(topics.grp, [1])}
    b.kafka.send(SYNC_GROUP, sync_version, b.sync_body(None))  # waits for the leader
    mine = a.sync(sync_version, plan)
    theirs = b.kafka.recv(SYNC_GROUP, sync_version)
    assert (mine.error_code, mine.assignment) == (NONE, plan[a.member_id])
    assert (theirs.error_code, theirs.assignment) == (NONE, plan[b.member_id])
    if sync_version >= 5:
        assert (mine.protocol_type, mine.protocol_name) == ("consumer", "range")
        assert (theirs.protocol_type, theirs.protocol_name) == ("consumer", "range")

    d = describe(broker, group)
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert sorted(
        (m.member_id, m.member_metadata, m.member_assignment) for m in d.members
    ) == sorted((m, subscription(topics.grp), plan[m]) for m in plan)
    assert a.heartbeat() == b.heartbeat() == NONE


@pytest.mark.parametrize(
    ("version", "label", "error"),
    [
        (0, "stale_generation", ILLEGAL_GENERATION),
        (5, "stale_generation", ILLEGAL_GENERATION),
        (5, "future_generation", ILLEGAL_GENERATION),
        (0, "unknown_member", UNKNOWN_MEMBER_ID),
        (5, "unknown_member", UNKNOWN_MEMBER_ID),
        (5, "protocol_type", INCONSISTENT_GROUP_PROTOCOL),
        (5, "protocol_name", INCONSISTENT_GROUP_PROTOCOL),
        (5, "null_protocol", INCONSISTENT_GROUP_PROTOCOL),
    ],
)
def test_bad_sync_changes_nothing(
    broker: Broker, topics: Topics, members: list[Member], version: int, label: str, error: int
) -> None:
    a, b = form_group(broker, members, topics.grp, 2, sync_version=version)
    before = describe(broker, a.group)
    changes: dict[str, Any] = {
        "stale_generation": {"generation_id": b.generation - 1},
        "future_generation": {"generation_id": b.generation + 1},
        "unknown_member": {"member_id": "nobody"},
        "protocol_type": {"protocol_type": "connect"},
        "protocol_name": {"protocol_name": "roundrobin"},
        "null_protocol": {"protocol_type": None, "protocol_name": None},
    }[label]
    resp = b.sync(version, {b.member_id: b"mine now"}, **changes)
    assert (resp.error_code, resp.assignment) == (error, b"")
    if version >= 5:
        assert (resp.protocol_type, resp.protocol_name) == (None, None)
    after = describe(broker, a.group)
    assert after == before and after.group_state == "Stable"
    assert b.heartbeat() == NONE
    again = b.sync(version)
    assert (again.error_code, again.assignment) == (NONE, assignment(topics.grp, [1]))


def test_sync_unknown_group_and_empty_id(
    broker: Broker, topics: Topics, members: list[Member]
) -> None:
    a = Member(broker, new_group(), topics.grp)
    members.append(a)
    a.member_id, a.generation = "nobody", 1
    assert a.sync(5).error_code == UNKNOWN_MEMBER_ID
    assert a.sync(0).error_code == UNKNOWN_MEMBER_ID
    assert state(broker, a.group) == "Dead"
    a.group = ""
    assert a.sync(5).error_code == INVALID_GROUP_ID


def test_during_rebalance(broker: Broker, topics: Topics, members: list[Member]) -> None:
    [a] = form_group(broker, members, topics.grp)
    b = Member(broker, a.group, topics.grp)
    members.append(b)
    assert b.join().error_code == MEMBER_ID_REQUIRED
    b.send_join()
    wait_state(broker, a.group, "PreparingRebalance")
    assert a.sync(5, {a.member_id: b"x"}).error_code == REBALANCE_IN_PROGRESS
    assert a.heartbeat(0) == a.heartbeat(4) == REBALANCE_IN_PROGRESS
    assert b.heartbeat() == ILLEGAL_GENERATION  # its join is pending: generation -1
    # a commit with the current generation is accepted while preparing
    assert a.commit({topics.grp: {0: 3}}) == {(topics.grp, 0): NONE}
    assert fetched(broker, a.group)[(topics.grp, 0)][0] == 3
    d = describe(broker, a.group)
    assert (d.group_state, d.protocol_data) == ("PreparingRebalance", "")
    # Kafka 4: no metadata outside Stable, each member's last assignment (none for B yet)
    assert {(m.member_id, m.member_metadata, m.member_assignment) for m in d.members} == {
        (a.member_id, b"", assignment(topics.grp, [0])),
        (b.member_id, b"", b""),
    }
    old = a.generation
    assert a.join().generation_id == b.joined().generation_id == old + 1
    assert a.heartbeat() == NONE
    assert a.heartbeat(generation_id=old) == ILLEGAL_GENERATION


def test_awaiting_sync(broker: Broker, topics: Topics, members: list[Member]) -> None:
    a = Member(broker, new_group(), topics.grp)
    members.append(a)
    a.join_new()
    assert a.heartbeat() == NONE
    assert a.commit({topics.grp: {0: 4}}) == {(topics.grp, 0): REBALANCE_IN_PROGRESS}
    assert fetched(broker, a.group) == {}
    assert state(broker, a.group) == "CompletingRebalance"
    assert a.sync(5, {a.member_id: b"mine"}).assignment == b"mine"
    d = describe(broker, a.group)
    assert d.group_state == "Stable" and d.members[0].member_assignment == b"mine"


def test_follower_sync_again_in_stable_group(
    broker: Broker, topics: Topics, members: list[Member]
) -> None:
    _, b = form_group(broker, members, topics.grp, 2)
    for version in (5, 0):
        resp = b.sync(version)
        assert (resp.error_code, resp.assignment) == (NONE, assignment(topics.grp, [1]))


# -- Heartbeat -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "label", "error"),
    [
        (0, "ok", NONE),
        (4, "ok", NONE),
        (0, "unknown_member", UNKNOWN_MEMBER_ID),
        (4, "unknown_member", UNKNOWN_MEMBER_ID),
        (0, "stale_generation", ILLEGAL_GENERATION),
        (4, "stale_generation", ILLEGAL_GENERATION),
        (4, "future_generation", ILLEGAL_GENERATION),
        (4, "unknown_instance", UNKNOWN_MEMBER_ID),
        (4, "unknown_group", UNKNOWN_MEMBER_ID),
        (4, "empty_group_id", INVALID_GROUP_ID),
    ],
)
def test_heartbeat(
    broker: Broker, topics: Topics, members: list[Member], version: int, label: str, error: int
) -> None:
    [a] = form_group(broker, members, topics.grp)
    before = describe(broker, a.group)
    changes: dict[str, Any] = {
        "ok": {},
        "unknown_member": {"member_id": "nobody"},
        "stale_generation": {"generation_id": a.generation - 1},
        "future_generation": {"generation_id": a.generation + 1},
        "unknown_instance": {"group_instance_id": "nobody-inst"},
        "unknown_group": {"group_id": new_group()},
        "empty_group_id": {"group_id": ""},
    }[label]
    assert a.heartbeat(version, **changes) == error
    assert describe(broker, a.group) == before


def test_static_member_replaced_is_fenced(
    broker: Broker, topics: Topics, members: list[Member]
) -> None:
    [a] = form_group(broker, members, topics.grp, instance_id="inst-1")
    a2 = Member(broker, a.group, topics.grp, instance_id="inst-1")
    members.append(a2)
    resp = a2.join(9)
    # the same instance takes over: a new member id, no new generation
    assert (resp.error_code, resp.generation_id, resp.leader) == (NONE, 1, a2.member_id)
    assert a2.member_id != a.member_id and re.fullmatch(f"inst-1-{UUID}", a2.member_id)
    assert a.heartbeat() == FENCED_INSTANCE_ID
    assert a.heartbeat(group_instance_id=None) == UNKNOWN_MEMBER_ID
    assert a2.heartbeat() == NONE
    assert a.sync(5).error_code == FENCED_INSTANCE_ID
    assert a.commit({topics.grp: {0: 1}}) == {(topics.grp, 0): FENCED_INSTANCE_ID}
    assert a.commit({topics.grp: {0: 1}}, version=6) == {(topics.grp, 0): UNKNOWN_MEMBER_ID}
    assert fetched(broker, a.group) == {}
    leave = broker.ask(
        LEAVE_GROUP,
        3,
        {
            "group_id": a.group,
            "members": [{"member_id": a.member_id, "group_instance_id": "inst-1"}],
        },
    )
    assert leave.error_code == NONE
    assert [(m.member_id, m.error_code) for m in leave.members] == [
        (a.member_id, FENCED_INSTANCE_ID)
    ]
    d = describe(broker, a.group)
    assert d.group_state == "Stable"
    assert [(m.member_id, m.group_instance_id) for m in d.members] == [(a2.member_id, "inst-1")]


# -- LeaveGroup ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 2])
def test_leave_single(broker: Broker, topics: Topics, members: list[Member], version: int) -> None:
    a, b = form_group(broker, members, topics.grp, 2)
    before = describe(broker, a.group)
    for body in (
        {"group_id": a.group, "member_id": "nobody"},
        {"group_id": new_group(), "member_id": b.member_id},
    ):
        assert broker.ask(LEAVE_GROUP, version, body).error_code == UNKNOWN_MEMBER_ID
    assert describe(broker, a.group) == before
    resp = broker.ask(LEAVE_GROUP, version, {"group_id": a.group, "member_id": b.member_id})
    assert resp.error_code == NONE
    assert state(broker, a.group) == "PreparingRebalance"
    assert (a.heartbeat(), b.heartbeat()) == (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID)


def test_last_member_leaving_empties_the_group(
    broker: Broker, topics: Topics, members: list[Member]
) -> None:
    [a] = form_group(broker, members, topics.grp)
    leave = broker.ask(
        LEAVE_GROUP, 5, {"group_id": a.group, "members": [{"member_id": a.member_id}]}
    )
    assert [(m.member_id, m.error_code) for m in leave.members] == [(a.member_id, NONE)]
    d = describe(broker, a.group)
    assert (d.group_state, d.members) == ("Empty", ())
    b = Member(broker, a.group, topics.grp)
    members.append(b)
    # the rebalance that emptied the group was generation 2
    assert b.join_new().generation_id == 3


@pytest.mark.parametrize("version", [3, 4, 5])
def test_leave_batch(broker: Broker, topics: Topics, members: list[Member], version: int) -> None:
    a, b = form_group(broker, members, topics.grp, 2)
    s = Member(broker, a.group, topics.grp, instance_id="inst-s")
    members.append(s)
    s.send_join()
    wait_state(broker, a.group, "PreparingRebalance")
    a.send_join()
    b.send_join()
    assert {m.joined().error_code for m in (s, a, b)} == {NONE}
    for m in (b, s):
        m.kafka.send(SYNC_GROUP, 5, m.sync_body(None))
    a.sync(5, {m.member_id: b"" for m in (a, b, s)})
    for m in (b, s):
        m.kafka.recv(SYNC_GROUP, 5)
    leaving = [
        {"member_id": a.member_id, "group_instance_id": None, "reason": "bye"},
        {"member_id": "", "group_instance_id": "inst-s"},
        {"member_id": "nobody", "group_instance_id": None},
        {"member_id": "", "group_instance_id": "no-such-instance"},
    ]
    resp = broker.ask(LEAVE_GROUP, version, {"group_id": a.group, "members": leaving})
    assert resp.error_code == NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in resp.members] == [
        (a.member_id, None, NONE),
        ("", "inst-s", NONE),
        ("nobody", None, UNKNOWN_MEMBER_ID),
        ("", "no-such-instance", UNKNOWN_MEMBER_ID),
    ]
    d = describe(broker, a.group)
    assert d.group_state == "PreparingRebalance"
    assert [m.member_id for m in d.members] == [b.member_id]
    assert (b.heartbeat(), s.heartbeat()) == (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID)


@pytest.mark.parametrize("version", [3, 5])
def test_leave_batch_fenced_and_unknown_group(
    broker: Broker, topics: Topics, members: list[Member], version: int
) -> None:
    [a] = form_group(broker, members, topics.grp, instance_id="inst-f")
    before = describe(broker, a.group)
    body = {"group_id": a.group, "members": [{"member_id": "wrong", "group_instance_id": "inst-f"}]}
    resp = broker.ask(LEAVE_GROUP, version, body)
    assert resp.error_code == NONE
    assert [(m.member_id, m.error_code) for m in resp.members] == [("wrong", FENCED_INSTANCE_ID)]
    assert describe(broker, a.group) == before
    body = {"group_id": new_group(), "members": [{"member_id": "x"}]}
    resp = broker.ask(LEAVE_GROUP, version, body)
    assert resp.error_code == NONE
    assert [(m.member_id, m.error_code) for m in resp.members] == [("x", UNKNOWN_MEMBER_ID)]
    resp = broker.ask(LEAVE_GROUP, version, {"group_id": new_group(), "members": []})
    assert (resp.error_code, resp.members) == (NONE, ())


# -- OffsetCommit --------------------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 3, 5, 7, 8, 9, 10])
def test_standalone_commit_and_fetch(broker: Broker, topics: Topics, version: int) -> None:
    group = new_group()
    meta = f"meta-v{version}"
    errors = commit(broker, group, {topics.grp: {0: 10, 1: 20}}, version, metadata=meta)
    assert errors == {(topics.grp, 0): NONE, (topics.grp, 1): NONE}
    want = {(topics.grp, 0): (10, meta, NONE), (topics.grp, 1): (20, meta, NONE)}
    assert fetched(broker, group, {topics.grp: [0, 1]}, 1) == want
    assert fetched(broker, group) == want
    d = describe(broker, group)
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data, d.members) == (
        NONE,
        "Empty",
        "",
        "",
        (),
    )


@pytest.mark.parametrize("version", [2, 9, 10])
def test_commit_to_unknown_topic_and_partition(
    broker: Broker, topics: Topics, version: int
) -> None:
    group = new_group()
    missing = f"missing-{uuid.uuid4().hex[:8]}"  # v10: an id no topic has
    errors = commit(broker, group, {topics.grp: {0: 5, 7: 1}, missing: {0: 1}}, version)
    assert errors == {
        (topics.grp, 0): NONE,
        (topics.grp, 7): UNKNOWN_TOPIC_OR_PARTITION,
        (missing, 0): UNKNOWN_TOPIC_ID if version >= 10 else UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert fetched(broker, group) == {(topics.grp, 0): (5, "meta", NONE)}
    assert state(broker, group) == "Empty"


@pytest.mark.parametrize("version", [2, 9, 10])
def test_commit_metadata_limit(broker: Broker, topics: Topics, version: int) -> None:
    group = new_group()
    errors = commit(broker, group, {topics.grp: {0: (1, "a" * 4096), 1: (2, "a" * 4097)}}, version)
    assert errors == {(topics.grp, 0): NONE, (topics.grp, 1): OFFSET_METADATA_TOO_LARGE}
    assert fetched(broker, group) == {(topics.grp, 0): (1, "a" * 4096, NONE)}


def test_commit_null_metadata_and_negative_offsets(broker: Broker, topics: Topics) -> None:
    group = new_group()
    assert set(commit(broker, group, {topics.grp: {0: (1, None), 1: (2, "")}}).values()) == {NONE}
    assert fetched(broker, group) == {
        (topics.grp, 0): (1, "", NONE),
        (topics.grp, 1): (2, "", NONE),
    }
    group = new_group()
    assert set(commit(broker, group, {topics.grp: {0: -1, 1: -5}}).values()) == {NONE}
    assert fetched(broker, group) == {
        (topics.grp, 0): (-1, "meta", NONE),
        (topics.grp, 1): (-5, "meta", NONE),
    }


@pytest.mark.parametrize(
    ("version", "label", "error"),
    [
        (2, "member", NONE),
        (5, "member", NONE),
        (9, "member", NONE),
        (2, "stale_generation", ILLEGAL_GENERATION),
        (5, "stale_generation", ILLEGAL_GENERATION),
        (9, "stale_generation", ILLEGAL_GENERATION),
        (9, "future_generation", ILLEGAL_GENERATION),
        (2, "unknown_member", UNKNOWN_MEMBER_ID),
        (9, "unknown_member", UNKNOWN_MEMBER_ID),
        (9, "standalone", UNKNOWN_MEMBER_ID),
        (9, "unknown_instance", UNKNOWN_MEMBER_ID),
        (10, "member", NONE),
        (10, "stale_generation", ILLEGAL_GENERATION),
        (10, "unknown_member", UNKNOWN_MEMBER_ID),
    ],
)
def test_member_commit(
    broker: Broker, topics: Topics, members: list[Member], version: int, label: str, error: int
) -> None:
    [a] = form_group(broker, members, topics.grp)
    changes: dict[str, Any] = {
        "member": {},
        "stale_generation": {"generation_id_or_member_epoch": a.generation - 1},
        "future_generation": {"generation_id_or_member_epoch": a.generation + 1},
        "unknown_member": {"member_id": "nobody"},
        "standalone": {"generation_id_or_member_epoch": -1, "member_id": ""},
        "unknown_instance": {"group_instance_id": "nobody-inst"},
    }[label]
    assert a.commit({topics.grp: {0: 7}}, version, **changes) == {(topics.grp, 0): error}
    assert fetched(broker, a.group) == (
        {(topics.grp, 0): (7, "meta", NONE)} if error == NONE else {}
    )
    assert state(broker, a.group) == "Stable"


@pytest.mark.parametrize(("version", "error"), [(8, ILLEGAL_GENERATION), (9, GROUP_ID_NOT_FOUND)])
def test_commit_with_generation_to_unknown_group(
    broker: Broker, topics: Topics, version: int, error: int
) -> None:
    """Kafka 4 (KIP-848): GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before."""
    group = new_group()
    errors = commit(broker, group, {topics.grp: {0: 1}}, version, generation=3, member_id="m")
    assert errors == {(topics.grp, 0): error}
    assert state(broker, group) == "Dead"
    assert commit(broker, group, {topics.grp: {0: 1}}, member_id="m") == {(topics.grp, 0): NONE}
    assert fetched(broker, group) == {(topics.grp, 0): (1, "meta", NONE)}


@pytest.mark.parametrize("version", [2, 9, 10])
def test_commit_with_empty_group_id(broker: Broker, topics: Topics, version: int) -> None:
    # Kafka checks only that OffsetCommit's group id is not null; '' is a group like others
    assert commit(broker, "", {topics.other: {0: 9}}, version) == {(topics.other, 0): NONE}
    assert fetched(broker, "", {topics.other: [0]}) == {(topics.other, 0): (9, "meta", NONE)}
    assert state(broker, "") == "Empty"
    for error in (NONE, GROUP_ID_NOT_FOUND):
        resp = broker.ask(DELETE_GROUPS, 2, {"groups_names": [""]})
        assert [(r.group_id, r.error_code) for r in resp.results] == [("", error)]
    assert fetched(broker, "", {topics.other: [0]}) == {(topics.other, 0): (-1, "", NONE)}


# -- OffsetFetch ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 5, 6, 7, 8, 9, 10])
def test_offset_fetch_named(broker: Broker, topics: Topics, version: int) -> None:
    group = new_group()
    commit(broker, group, {topics.grp: {0: 10}, topics.other: {0: 30}}, metadata="m1")
    missing = f"missing-{uuid.uuid4().hex[:8]}"  # v10: an id no topic has
    wanted = {topics.grp: [0, 1, 5], topics.other: [0], missing: [0]}
    assert fetched(broker, group, wanted, version) == {
        (topics.grp, 0): (10, "m1", NONE),
        (topics.grp, 1): (-1, "", NONE),
        (topics.grp, 5): (-1, "", NONE),
        (topics.other, 0): (30, "m1", NONE),
        (missing, 0): (-1, "", UNKNOWN_TOPIC_ID if version >= 10 else NONE),
    }


@pytest.mark.parametrize("version", [2, 5, 6, 8, 10])
def test_offset_fetch_all(broker: Broker, topics: Topics, version: int) -> None:
    group = new_group()
    commit(broker, group, {topics.grp: {0: 10}, topics.other: {0: 30}}, metadata="m1")
    assert fetched(broker, group, None, version) == {
        (topics.grp, 0): (10, "m1", NONE),
        (topics.other, 0): (30, "m1", NONE),
    }
    if version >= 5:
        resp = broker.ask(OFFSET_FETCH, version, fetch_body(group, None))
        answered = resp.groups[0].topics if version >= 8 else resp.topics
        assert {p.committed_leader_epoch for t in answered for p in t.partitions} == {-1}


@pytest.mark.parametrize("version", [1, 2, 5, 8, 10])
def test_offset_fetch_unknown_group(broker: Broker, topics: Topics, version: int) -> None:
    group = new_group()
    assert fetched(broker, group, {topics.grp: [0]}, version) == {(topics.grp, 0): (-1, "", NONE)}
    if version >= 2:
        assert fetched(broker, group, None, version) == {}
    assert state(broker, group) == "Dead"


def test_offset_fetch_several_groups(broker: Broker, topics: Topics) -> None:
    one, two, none = new_group(), new_group(), new_group()
    commit(broker, one, {topics.grp: {0: 1}, topics.other: {0: 2}}, metadata="x")
    commit(broker, two, {topics.grp: {0: 3}}, metadata="y")
    named = [{"name": topics.grp, "partition_indexes": [0, 1]}]
    body = {
        "groups": [
            {"group_id": one, "topics": None},
            {"group_id": two, "topics": named},
            {"group_id": none, "topics": None},
            {"group_id": none + "2", "topics": named},
        ],
        "require_stable": False,
    }
    resp = broker.ask(OFFSET_FETCH, 8, body)
    got = {
        g.group_id: (
            g.error_code,
            {
                (t.name, p.partition_index): (p.committed_offset, p.metadata)
                for t in g.topics
                for p in t.partitions
            },
        )
        for g in resp.groups
    }
    assert got == {
        one: (NONE, {(topics.grp, 0): (1, "x"), (topics.other, 0): (2, "x")}),
        two: (NONE, {(topics.grp, 0): (3, "y"), (topics.grp, 1): (-1, "")}),
        none: (NONE, {}),
        none + "2": (NONE, {(topics.grp, 0): (-1, ""), (topics.grp, 1): (-1, "")}),
    }


@pytest.mark.parametrize("version", [7, 8, 10])
def test_offset_fetch_require_stable(broker: Broker, topics: Topics, version: int) -> None:
    group = new_group()
    commit(broker, group, {topics.grp: {0: 10}})
    ids = topic_ids(broker, [topics.grp]) if version >= 10 else None
    body = fetch_body(group, {topics.grp: [0, 1]}, stable=True, ids=ids)
    resp = broker.ask(OFFSET_FETCH, version, body)
    g = resp.groups[0] if version >= 8 else resp
    assert g.error_code == NONE
    assert [(p.committed_offset, p.error_code) for p in g.topics[0].partitions] == [
        (10, NONE),
        (-1, NONE),
    ]


def _partition_answers(topics: Any) -> list[tuple[Any, list[tuple[int, ...]]]]:
    """An OffsetFetch v10 group's topics: (topic id, [(partition, offset, leader epoch,
    metadata, error)])."""
    return [
        (
            t.topic_id,
            [
                (
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata,
                    p.error_code,
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def test_offsets_by_topic_id(broker: Broker, topics: Topics) -> None:
    """v10 (Kafka 4.1) names topics by id in OffsetCommit and OffsetFetch, requests and
    answers; the offsets are one set whichever version wrote or reads them."""
    group = new_group()
    ids = topic_ids(broker, [topics.grp, topics.other])
    body = commit_body(group, {topics.grp: {0: (10, "by-id"), 1: (11, None)}}, ids=ids)
    body["topics"][0]["partitions"][0]["committed_leader_epoch"] = 4
    resp = broker.ask(OFFSET_COMMIT, 10, body)
    assert [
        (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics
    ] == [(ids[topics.grp], [(0, NONE), (1, NONE)])]
    # v9 by name, then every way of reading sees both commits.
    assert commit(broker, group, {topics.other: {0: (30, "by-name")}}, 9) == {
        (topics.other, 0): NONE
    }
    want = {
        (topics.grp, 0): (10, "by-id", NONE),
        (topics.grp, 1): (11, "", NONE),
        (topics.other, 0): (30, "by-name", NONE),
    }
    wanted = {topics.grp: [0, 1], topics.other: [0]}
    for version in (8, 9, 10):
        assert fetched(broker, group, wanted, version) == want, version
        assert fetched(broker, group, None, version) == want, version
    # The answer by id, with the leader epoch committed.
    resp = broker.ask(OFFSET_FETCH, 10, fetch_body(group, {topics.grp: [1, 0]}, ids=ids))
    [g] = resp.groups
    assert (g.group_id, g.error_code) == (group, NONE)
    assert _partition_answers(g.topics) == [
        (ids[topics.grp], [(1, 11, -1, "", NONE), (0, 10, 4, "by-id", NONE)])
    ]
    # A v10 commit replaces a v9 one, and v9 reads it.
    assert commit(broker, group, {topics.other: {0: (31, "again")}}, 10) == {
        (topics.other, 0): NONE
    }
    assert fetched(broker, group, {topics.other: [0]}, 9) == {
        (topics.other, 0): (31, "again", NONE)
    }


def test_unknown_topic_ids(broker: Broker, topics: Topics) -> None:
    """An id no topic has (the zero id too, a client that knows none): UNKNOWN_TOPIC_ID for
    each of its partitions, the id echoed; the other topics are served as usual."""
    group = new_group()
    known = topic_ids(broker, [topics.grp])[topics.grp]
    unknown = uuid.uuid4()

    def parts(*indexes: int) -> list[dict[str, Any]]:
        return [
            {
                "partition_index": i,
                "committed_offset": 5 + i,
                "committed_leader_epoch": -1,
                "committed_metadata": "m",
            }
            for i in indexes
        ]

    body = {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {"topic_id": unknown, "partitions": parts(0, 1)},
            {"topic_id": None, "partitions": parts(0)},  # the zero id
            {"topic_id": known, "partitions": parts(0, 9)},
        ],
    }
    resp = broker.ask(OFFSET_COMMIT, 10, body)
    assert [
        (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics
    ] == [
        (unknown, [(0, UNKNOWN_TOPIC_ID), (1, UNKNOWN_TOPIC_ID)]),
        (None, [(0, UNKNOWN_TOPIC_ID)]),
        # Kafka 4: the partitions refused before the coordinator come first
        (known, [(9, UNKNOWN_TOPIC_OR_PARTITION), (0, NONE)]),
    ]
    assert fetched(broker, group) == {(topics.grp, 0): (5, "m", NONE)}
    wanted = [
        {"topic_id": known, "partition_indexes": [0, 1]},
        {"topic_id": unknown, "partition_indexes": [0, 1]},
        {"topic_id": None, "partition_indexes": [0]},
    ]
    body = {"groups": [{"group_id": group, "topics": wanted}], "require_stable": False}
    [g] = broker.ask(OFFSET_FETCH, 10, body).groups
    assert (g.group_id, g.error_code) == (group, NONE)
    assert _partition_answers(g.topics) == [
        (known, [(0, 5, -1, "m", NONE), (1, -1, -1, "", NONE)]),
        (unknown, [(0, -1, -1, "", UNKNOWN_TOPIC_ID), (1, -1, -1, "", UNKNOWN_TOPIC_ID)]),
        (None, [(0, -1, -1, "", UNKNOWN_TOPIC_ID)]),
    ]


def test_deleted_topic_by_id(broker: Broker, topics: Topics) -> None:
    """Once its topic is deleted, an id is unknown to OffsetCommit and OffsetFetch v10, and
    fetching all of a group's offsets at v10 leaves the topic out (it has no id to be
    named by)."""
    group = new_group()
    doomed = f"doomed-{uuid.uuid4().hex[:8]}"
    create_topic(broker, doomed, 1)
    old = topic_ids(broker, [doomed])[doomed]
    assert commit(broker, group, {doomed: {0: 3}, topics.other: {0: 4}}, 10) == {
        (doomed, 0): NONE,
        (topics.other, 0): NONE,
    }
    resp = broker.ask(20, 6, {"topics": [{"name": doomed, "topic_id": None}], "timeout": 30_000})
    assert [r.error_code for r in resp.responses] == [NONE]
    deadline = time.monotonic() + 20
    while doomed in topic_ids(broker):  # Kafka deletes a moment later
        assert time.monotonic() < deadline
        time.sleep(0.1)
    ids = {doomed: old}
    body = commit_body(group, {doomed: {0: 5}}, ids=ids)
    assert commit_errors(broker.ask(OFFSET_COMMIT, 10, body), ids) == {
        (doomed, 0): UNKNOWN_TOPIC_ID
    }
    [g] = broker.ask(OFFSET_FETCH, 10, fetch_body(group, {doomed: [0]}, ids=ids)).groups
    assert _partition_answers(g.topics) == [(old, [(0, -1, -1, "", UNKNOWN_TOPIC_ID)])]
    assert fetched(broker, group, None, 10) == {(topics.other, 0): (4, "meta", NONE)}


# -- DescribeGroups and ListGroups ---------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 3, 4, 5, 6])
def test_describe_groups(
    broker: Broker, topics: Topics, members: list[Member], version: int
) -> None:
    a, b = form_group(broker, members, topics.grp, 2)
    empty = new_group()
    commit(broker, empty, {topics.grp: {0: 1}})
    unknown = new_group()
    body = {"groups": [a.group, empty, unknown], "include_authorized_operations": False}
    resp = broker.ask(DESCRIBE_GROUPS, version, body)
    # Skiff answers in request order; Kafka 4 by __consumer_offsets partition.
    by_id = {g.group_id: g for g in resp.groups}
    assert sorted(by_id) == sorted([a.group, empty, unknown]) and len(resp.groups) == 3
    stable, e, u = by_id[a.group], by_id[empty], by_id[unknown]
    assert (stable.error_code, stable.group_state, stable.protocol_type, stable.protocol_data) == (
        NONE,
        "Stable",
        "consumer",
        "range",
    )
    assert sorted(
        (m.member_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment)
        for m in stable.members
    ) == sorted(
        (
            m.member_id,
            CLIENT_ID,
            "/127.0.0.1",
            subscription(topics.grp),
            assignment(topics.grp, [i]),
        )
        for i, m in enumerate((a, b))
    )
    assert (e.error_code, e.group_state, e.protocol_type, e.protocol_data, e.members) == (
        NONE,
        "Empty",
        "",
        "",
        (),
    )
    # Unknown: Dead, with no error before v6, GROUP_ID_NOT_FOUND from v6 (KIP-1043).
    assert (u.error_code, u.group_state, u.protocol_type, u.protocol_data, u.members) == (
        NONE if version < 6 else GROUP_ID_NOT_FOUND,
        "Dead",
        "",
        "",
        (),
    )
    if version >= 6:
        assert u.error_message == f"Group {unknown} not found."
        assert stable.error_message is None and e.error_message is None
    if version >= 3:
        assert {g.authorized_operations for g in resp.groups} == {UNSET_OPERATIONS}
        body["include_authorized_operations"] = True
        asked = broker.ask(DESCRIBE_GROUPS, version, body)
        # Kafka 4: none for a group it answers GROUP_ID_NOT_FOUND (v6)
        assert {g.group_id: g.authorized_operations for g in asked.groups} == {
            a.group: GROUP_OPERATIONS,
            empty: GROUP_OPERATIONS,
            unknown: GROUP_OPERATIONS if version < 6 else UNSET_OPERATIONS,
        }
    assert broker.ask(DESCRIBE_GROUPS, version, {"groups": []}).groups == ()


@pytest.mark.parametrize("version", range(6))
def test_list_groups(broker: Broker, topics: Topics, members: list[Member], version: int) -> None:
    [stable] = form_group(broker, members, topics.grp)
    [connect] = form_group(
        broker, members, topics.grp, protocol_type="connect", protocols=[("worker", b"w")]
    )
    waiting = Member(broker, new_group(), topics.grp)
    members.append(waiting)
    waiting.join_new()
    empty = new_group()
    commit(broker, empty, {topics.grp: {0: 1}})
    ours = {
        stable.group: ("consumer", "Stable"),
        connect.group: ("connect", "Stable"),
        waiting.group: ("consumer", "CompletingRebalance"),
        empty: ("", "Empty"),
    }

    def listed(
        states: tuple[str, ...] = (), types: tuple[str, ...] = ()
    ) -> dict[str, tuple[Any, ...]]:
        body = {"states_filter": list(states), "types_filter": list(types)}
        resp = broker.ask(LIST_GROUPS, version, body)
        assert resp.error_code == NONE
        out = {}
        for g in resp.groups:
            if g.group_id in ours:
                out[g.group_id] = (g.protocol_type, getattr(g, "group_state", None))
                if version >= 5:
                    assert g.group_type == "classic"
        return out

    full = {g: (t, s if version >= 4 else None) for g, (t, s) in ours.items()}
    assert listed() == full
    if version >= 4:
        assert listed(("Stable",)) == {g: v for g, v in full.items() if v[1] == "Stable"}
        assert listed(("stable", "empty")) == {
            g: v for g, v in full.items() if v[1] in ("Stable", "Empty")
        }
        assert listed(("Empty", "CompletingRebalance")) == {
            g: v for g, v in full.items() if v[1] in ("Empty", "CompletingRebalance")
        }
        assert listed(("NoSuchState",)) == {}
    if version >= 5:
        assert listed(types=("classic",)) == full
        assert listed(types=("consumer",)) == listed(types=("nope",)) == {}


# -- DeleteGroups and OffsetDelete ---------------------------------------------------------


def test_a_deleted_topic_takes_its_committed_offsets(broker: Broker, topics: Topics) -> None:
    """Kafka's coordinator drops every group's offsets of a deleted topic: a topic made
    again under the name starts without them, and the group's other offsets stay."""
    name = f"gone-{uuid.uuid4().hex[:10]}"
    create_topic(broker, name, 2)
    group = new_group()
    assert set(commit(broker, group, {name: {0: 5, 1: 6}, topics.other: {0: 3}}).values()) == {NONE}
    deleted = broker.ask(
        DELETE_TOPICS, 6, {"topics": [{"name": name, "topic_id": None}], "timeout": 30_000}
    )
    assert deleted.responses[0].error_code == NONE
    listed = {"topics": [{"name": name}], "allow_auto_topic_creation": False}
    deadline = time.monotonic() + 30
    while broker.ask(METADATA, 12, listed).topics[0].error_code == NONE:
        assert time.monotonic() < deadline, "the topic is still listed"
        time.sleep(0.2)
    create_topic(broker, name, 2)
    # Kafka drops them a moment after answering DeleteTopics (its metadata propagates).
    wanted = {name: [0, 1], topics.other: [0]}
    expected = {(name, 0): (-1, "", NONE), (name, 1): (-1, "", NONE)}
    expected[(topics.other, 0)] = (3, "meta", NONE)
    deadline = time.monotonic() + 30
    while (got := fetched(broker, group, wanted)) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    assert got == expected


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_delete_groups(broker: Broker, topics: Topics, members: list[Member], version: int) -> None:
    [a] = form_group(broker, members, topics.grp)
    before = describe(broker, a.group)
    empty, unknown = new_group(), new_group()
    commit(broker, empty, {topics.grp: {0: 1, 1: 2}})
    pending = Member(broker, new_group(), topics.grp)
    members.append(pending)
    assert pending.join().error_code == MEMBER_ID_REQUIRED
    names = [a.group, unknown, empty, pending.group]
    resp = broker.ask(DELETE_GROUPS, version, {"groups_names": names})
    assert {r.group_id: r.error_code for r in resp.results} == {
        a.group: NON_EMPTY_GROUP,
        unknown: GROUP_ID_NOT_FOUND,
        empty: NONE,
        pending.group: NONE,
    }
    if version >= 3:  # Kafka 4.4 gives a group's own refusal no message
        assert {r.error_message for r in resp.results} == {None}
    assert describe(broker, a.group) == before
    assert a.heartbeat() == NONE
    assert state(broker, empty) == state(broker, pending.group) == "Dead"
    assert fetched(broker, empty) == {}
    again = broker.ask(DELETE_GROUPS, version, {"groups_names": [empty]})
    assert [(r.group_id, r.error_code) for r in again.results] == [(empty, GROUP_ID_NOT_FOUND)]
    assert commit(broker, empty, {topics.grp: {0: 3}}) == {(topics.grp, 0): NONE}
    assert fetched(broker, empty) == {(topics.grp, 0): (3, "meta", NONE)}


def offset_delete(b: Broker, group: str, wanted: dict[str, list[int]]) -> tuple[int, Any]:
    body = {
        "group_id": group,
        "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]}
            for t, ps in wanted.items()
        ],
    }
    resp = b.ask(OFFSET_DELETE, 0, body)
    return resp.error_code, {
        (t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions
    }


def test_offset_delete_subscribed_group(
    broker: Broker, topics: Topics, members: list[Member]
) -> None:
    [a] = form_group(broker, members, topics.grp)  # subscribed to topics.grp
    assert set(a.commit({topics.grp: {0: 1, 1: 2}, topics.other: {0: 3}}).values()) == {NONE}
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    error, parts = offset_delete(
        broker, a.group, {topics.grp: [0], topics.other: [0], missing: [0]}
    )
    assert error == NONE
    assert parts == {
        (topics.grp, 0): GROUP_SUBSCRIBED_TO_TOPIC,
        (topics.other, 0): NONE,
        (missing, 0): UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert fetched(broker, a.group) == {
        (topics.grp, 0): (1, "meta", NONE),
        (topics.grp, 1): (2, "meta", NONE),
    }


def test_offset_delete_other_groups(broker: Broker, topics: Topics, members: list[Member]) -> None:
    empty = new_group()
    commit(broker, empty, {topics.grp: {0: 10, 1: 20}})
    assert offset_delete(broker, empty, {topics.grp: [0, 5]}) == (
        NONE,
        {(topics.grp, 0): NONE, (topics.grp, 5): UNKNOWN_TOPIC_OR_PARTITION},
    )
    assert fetched(broker, empty) == {(topics.grp, 1): (20, "meta", NONE)}
    assert state(broker, empty) == "Empty"

    assert offset_delete(broker, new_group(), {topics.grp: [0]}) == (GROUP_ID_NOT_FOUND, {})
    assert offset_delete(broker, "", {}) == (INVALID_GROUP_ID, {})

    [c] = form_group(
        broker, members, topics.grp, protocol_type="connect", protocols=[("worker", b"w")]
    )
    c.commit({topics.grp: {0: 1}})
    assert offset_delete(broker, c.group, {topics.grp: [0]}) == (NON_EMPTY_GROUP, {})
    assert fetched(broker, c.group) == {(topics.grp, 0): (1, "meta", NONE)}


# -- group ids beyond a Kafka string -------------------------------------------------------


def test_group_id_of_32767_characters_works(
    broker: Broker, topics: Topics, members: list[Member]
) -> None:
    group = "g" * 32_767
    a = Member(broker, group, topics.grp)
    members.append(a)
    a.join_new()
    assert a.sync(5, {a.member_id: b"x"}).assignment == b"x"
    assert broker.ask(FIND_COORDINATOR, 3, {"key": group, "key_type": 0}).error_code == NONE
    d = describe(broker, group)
    assert (d.group_id, d.group_state) == (group, "Stable")


@pytest.mark.parametrize("length", [32_768, 300_000])
def test_longer_group_id_closes_the_connection(broker: Broker, topics: Topics, length: int) -> None:
    """Kafka's request parser refuses strings over 32767 bytes, also compact ones: the
    request is not answered and the connection is closed."""
    group = "g" * length
    requests: list[tuple[int, int, Any]] = [
        (
            JOIN_GROUP,
            9,
            {
                "group_id": group,
                "session_timeout": SESSION_MS,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            },
        ),
        (FIND_COORDINATOR, 3, {"key": group, "key_type": 0}),
        (OFFSET_COMMIT, 8, commit_body(group, {topics.grp: {0: 1}})),
        (OFFSET_FETCH, 8, fetch_body(group, None)),
        (DESCRIBE_GROUPS, 5, {"groups": [group]}),
    ]
    for api_key, version, body in requests:
        with broker.connect() as kafka:
            kafka.send(api_key, version, body)
            with pytest.raises(ConnectionClosed):
                kafka.recv_raw()
    with broker.connect() as kafka:  # the broker itself is fine
        assert kafka.request(FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}).error_code == NONE


# -- Skiff's settings: initial rebalance delay, retention ----------------------------------


@pytest.fixture
def slow_start(own_redis: RedisServer, tmp_path: Path) -> Iterator[Broker]:
    b, server = start_broker(
        own_redis, tmp_path / "skiff.log", SKIFF_GROUP_INITIAL_REBALANCE_DELAY_MS="1000"
    )
    yield b
    stop_process(server.proc)


@skiff_only
def test_initial_rebalance_delay_gathers_members(slow_start: Broker, members: list[Member]) -> None:
    """group.initial.rebalance.delay.ms: the first rebalance of an empty group waits, so
    members joining meanwhile share generation 1."""
    wait_coordinator(slow_start)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    group = new_group()
    a, b = Member(slow_start, group, topic), Member(slow_start, group, topic)
    members += [a, b]
    started = time.monotonic()
    a.send_join(3)
    time.sleep(0.2)
    b.send_join(3)
    ra, rb = a.joined(), b.joined()
    assert time.monotonic() - started >= 1.0
    assert (ra.error_code, rb.error_code) == (NONE, NONE)
    assert ra.generation_id == rb.generation_id == 1
    assert ra.leader == rb.leader == a.member_id
    assert len(ra.members) == 2


@pytest.fixture
def short_retention(own_redis: RedisServer, tmp_path: Path) -> Iterator[Broker]:
    b, server = start_broker(
        own_redis,
        tmp_path / "skiff.log",
        SKIFF_OFFSETS_RETENTION_MINUTES="0.05",  # 3 s
        SKIFF_OFFSETS_RETENTION_CHECK_INTERVAL_MS="200",
    )
    yield b
    stop_process(server.proc)


@pytest.fixture
def fast_check(own_redis: RedisServer, tmp_path: Path) -> Iterator[Broker]:
    b, server = start_broker(
        own_redis, tmp_path / "skiff.log", SKIFF_OFFSETS_RETENTION_CHECK_INTERVAL_MS="200"
    )
    yield b
    stop_process(server.proc)


def wait_until_gone(b: Broker, group: str, key: tuple[str, int], timeout: float) -> float:
    """Seconds until `key` has no committed offset in `group` (fails after timeout)."""
    started = time.monotonic()
    while key in fetched(b, group):
        assert time.monotonic() - started < timeout, f"{key} still committed"
        time.sleep(0.1)
    return time.monotonic() - started


@skiff_only
def test_v2_retention_time_expires_a_standalone_offset(fast_check: Broker) -> None:
    wait_coordinator(fast_check)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    create_topic(fast_check, topic, 1)
    short, default = new_group(), new_group()
    committed_at = time.monotonic()  # the offset's commit time is no earlier than this
    assert commit(fast_check, short, {topic: {0: 11}}, 2, retention_ms=3000) == {(topic, 0): NONE}
    assert commit(fast_check, default, {topic: {0: 12}}, 2) == {(topic, 0): NONE}
    assert fetched(fast_check, short) == {(topic, 0): (11, "meta", NONE)}
    assert fetched(fast_check, short, {topic: [0]}, 1) == {(topic, 0): (11, "meta", NONE)}
    wait_until_gone(fast_check, short, (topic, 0), timeout=30)
    assert time.monotonic() - committed_at >= 3.0  # not before the retention time
    assert fetched(fast_check, short, {topic: [0]}, 1) == {(topic, 0): (-1, "", NONE)}
    assert state(fast_check, short) == "Dead"  # an empty group without offsets is removed
    assert fetched(fast_check, default) == {(topic, 0): (12, "meta", NONE)}


@skiff_only
def test_standalone_offsets_expire_after_retention_minutes(short_retention: Broker) -> None:
    b = short_retention
    wait_coordinator(b)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    create_topic(b, topic, 1)
    group = new_group()
    assert commit(b, group, {topic: {0: 5}}, 9) == {(topic, 0): NONE}
    assert wait_until_gone(b, group, (topic, 0), timeout=8) >= 2.5
    assert state(b, group) == "Dead"


@skiff_only
def test_consumer_group_offsets_live_while_it_has_members(
    short_retention: Broker, members: list[Member]
) -> None:
    """offsets.retention.minutes counts from when the group became Empty; while a Stable
    consumer group is subscribed to a topic, that topic's offsets do not expire (offsets of
    topics it is not subscribed to expire as standalone ones do)."""
    b = short_retention
    wait_coordinator(b)
    subscribed, other = f"t-{uuid.uuid4().hex[:8]}", f"o-{uuid.uuid4().hex[:8]}"
    create_topic(b, subscribed, 1)
    create_topic(b, other, 1)
    [a] = form_group(b, members, subscribed)
    assert a.commit({subscribed: {0: 7}, other: {0: 8}}) == {
        (subscribed, 0): NONE,
        (other, 0): NONE,
    }
    deadline = time.monotonic() + 4.5  # longer than the 3 s retention
    while time.monotonic() < deadline:
        assert a.heartbeat() == NONE
        time.sleep(0.5)
    assert fetched(b, a.group) == {(subscribed, 0): (7, "meta", NONE)}
    leave = {"group_id": a.group, "members": [{"member_id": a.member_id}]}
    assert b.ask(LEAVE_GROUP, 5, leave).members[0].error_code == NONE
    assert state(b, a.group) == "Empty"
    assert wait_until_gone(b, a.group, (subscribed, 0), timeout=8) >= 2.5
    assert state(b, a.group) == "Dead"
