"""KIP-848 consumer groups on the wire: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69), member and group epochs, the broker's `uniform` and `range`
assignors, reconciliation (a partition goes to its new owner only once the old one's
heartbeat no longer lists it), leaving, session expiry, static members, offsets
committed at a member epoch, and a coordinator move that keeps everything.
Real clients (Kafka 4.x's Java consumer) are in tests/test_consumer_groups_java.py."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import create
from rawkafka import RawKafka

CG_HEARTBEAT, CG_DESCRIBE, API_VERSIONS = 68, 69, 18
OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS, DESCRIBE_GROUPS, JOIN_GROUP = 8, 9, 16, 15, 11
NONE, UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL, UNSUPPORTED_VERSION = 0, 25, 23, 35
INVALID_REQUEST, GROUP_ID_NOT_FOUND, FENCED_MEMBER_EPOCH = 42, 69, 110
UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, STALE_MEMBER_EPOCH = 111, 112, 113
INVALID_REGULAR_EXPRESSION = 128
HEARTBEAT_MS = 500


class Member:
    """One consumer-protocol member driven by hand."""

    def __init__(self, kafka: RawKafka, group: str, topics: list[str], **extra: Any) -> None:
        self.kafka, self.group, self.topics = kafka, group, topics
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict[uuid.UUID, list[int]] = {}
        self.extra = extra

    def heartbeat(self, owned: bool = False, epoch: int | None = None, **fields: Any) -> Any:
        body: dict[str, Any] = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": self.epoch if epoch is None else epoch,
            "instance_id": None,
            "rack_id": None,
            "rebalance_timeout": -1,
            "subscribed_topic_names": None,
            "subscribed_topic_regex": None,
            "server_assignor": None,
            "topic_partitions": None,
        }
        if body["member_epoch"] == 0:
            body.update(
                subscribed_topic_names=self.topics, rebalance_timeout=30_000, topic_partitions=[]
            )
            body.update(self.extra)
        if owned:
            body["topic_partitions"] = [
                {"topic_id": t, "partitions": ps} for t, ps in self.owned.items()
            ]
        body.update(fields)
        resp = self.kafka.request(CG_HEARTBEAT, 1, body)
        if resp.error_code == NONE:
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.owned = {
                    tp.topic_id: list(tp.partitions) for tp in resp.assignment.topic_partitions
                }
        return resp

    def partitions(self) -> list[int]:
        return sorted(p for ps in self.owned.values() for p in ps)


def _topic_id(kafka: RawKafka, name: str) -> uuid.UUID:
    resp = kafka.request(
        3,
        12,
        {
            "topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    return resp.topics[0].topic_id


def _describe(kafka: RawKafka, group: str) -> Any:
    resp = kafka.request(
        CG_DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False}
    )
    return resp.groups[0]


@pytest.fixture
def kafka(skiff: Skiff) -> Iterator[RawKafka]:
    with RawKafka("127.0.0.1", skiff.port) as client:
        yield client


def _wait(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_api_versions_advertise_68_and_69(kafka: RawKafka) -> None:
    resp = kafka.request(
        API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[CG_HEARTBEAT] == (0, 1)
    assert ranges[CG_DESCRIBE] == (0, 1)


def test_join_share_reconcile_and_leave(kafka: RawKafka, topic: str) -> None:
    create(kafka, topic, partitions=4)
    tid = _topic_id(kafka, topic)
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = Member(kafka, group, [topic])
    resp = a.heartbeat()
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (NONE, a.member_id, 1)
    assert resp.heartbeat_interval.total_seconds() * 1000 == 5000
    assert a.owned == {tid: [0, 1, 2, 3]}
    # A second member: a new group epoch (2), but A still owns everything.
    b = Member(kafka, group, [topic])
    resp = b.heartbeat()
    assert (resp.error_code, resp.member_epoch) == (NONE, 2)
    assert b.partitions() == []
    d = _describe(kafka, group)
    assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch) == (
        NONE,
        "Reconciling",
        2,
        2,
    )
    assert d.assignor_name == "uniform"
    targets = {m.member_id: m.target_assignment.topic_partitions for m in d.members}
    assert [list(tp.partitions) for tp in targets[a.member_id]] == [[0, 1]]
    assert [list(tp.partitions) for tp in targets[b.member_id]] == [[2, 3]]
    # A is asked to revoke 2 and 3, keeping its epoch until it has.
    resp = a.heartbeat()
    assert (resp.error_code, resp.member_epoch, a.partitions()) == (NONE, 1, [0, 1])
    # Not yet released: B gets nothing more.
    resp = b.heartbeat()
    assert (resp.member_epoch, resp.assignment) == (2, None)
    # A's heartbeat without 2 and 3: it moves to epoch 2; then B gets them.
    resp = a.heartbeat(owned=True)
    assert (resp.error_code, resp.member_epoch, a.partitions()) == (NONE, 2, [0, 1])
    resp = b.heartbeat()
    assert (resp.error_code, resp.member_epoch, b.partitions()) == (NONE, 2, [2, 3])
    d = _describe(kafka, group)
    assert (d.group_state, d.group_epoch) == ("Stable", 2)
    assert {m.member_id: m.member_epoch for m in d.members} == {a.member_id: 2, b.member_id: 2}
    assert all(m.member_type == 1 for m in d.members)
    # ListGroups v5 lists it as a consumer group; DescribeGroups v5, as Kafka's, has it
    # Dead without an error (not a classic group).
    resp = kafka.request(LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert ("consumer", "Stable", "consumer") in {
        (g.protocol_type, g.group_state, g.group_type) for g in resp.groups if g.group_id == group
    }
    resp = kafka.request(DESCRIBE_GROUPS, 5, {"groups": [group]})
    assert (resp.groups[0].error_code, resp.groups[0].group_state, resp.groups[0].members) == (
        NONE,
        "Dead",
        (),
    )
    # v6 (KIP-1043) says why.
    [v6] = kafka.request(DESCRIBE_GROUPS, 6, {"groups": [group]}).groups
    assert (v6.error_code, v6.group_state, v6.error_message) == (
        GROUP_ID_NOT_FOUND,
        "Dead",
        f"Group {group} is not a classic group.",
    )
    # A classic member cannot join it.
    resp = kafka.request(
        JOIN_GROUP,
        5,
        {
            "group_id": group,
            "session_timeout": 10_000,
            "rebalance_timeout": 10_000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
    )
    assert resp.error_code == INCONSISTENT_GROUP_PROTOCOL
    # B leaves: a new epoch, A takes 2 and 3 at once (nobody holds them).
    resp = b.heartbeat(epoch=-1)
    assert (resp.error_code, resp.member_epoch) == (NONE, -1)
    resp = a.heartbeat()
    assert (resp.error_code, resp.member_epoch, a.partitions()) == (NONE, 3, [0, 1, 2, 3])
    resp = b.heartbeat(epoch=2)
    assert resp.error_code == UNKNOWN_MEMBER_ID


def test_invalid_subscribed_topic_regex(kafka: RawKafka) -> None:
    # RE2 syntax as Kafka's RE2/J: an unclosed group and a look-ahead are both invalid.
    group = f"g-{uuid.uuid4().hex[:8]}"
    for regex, problem in (("(", "missing ): ("), ("^a(?=b)", "invalid perl operator: (?=")):
        resp = Member(kafka, group, []).heartbeat(
            subscribed_topic_names=None, subscribed_topic_regex=regex
        )
        assert (resp.error_code, resp.error_message, resp.member_epoch) == (
            INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {problem}.",
            0,
        )


def test_epoch_checks_and_invalid_requests(kafka: RawKafka, topic: str) -> None:
    create(kafka, topic, partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = Member(kafka, group, [topic])
    assert a.heartbeat().member_epoch == 1
    assert a.heartbeat(epoch=5).error_code == FENCED_MEMBER_EPOCH
    assert a.heartbeat(epoch=0, topic_partitions=None).error_code == INVALID_REQUEST
    resp = a.heartbeat(epoch=0, subscribed_topic_names=[], subscribed_topic_regex=None)
    assert (resp.error_code, resp.error_message) == (
        INVALID_REQUEST,
        "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
    )
    resp = a.heartbeat(member_id="")
    assert (resp.error_code, resp.error_message) == (INVALID_REQUEST, "MemberId can't be empty.")
    resp = a.heartbeat(epoch=-2)
    assert (resp.error_code, resp.error_message) == (INVALID_REQUEST, "InstanceId can't be null.")
    resp = a.heartbeat(server_assignor="sticky")
    assert resp.error_code == UNSUPPORTED_ASSIGNOR
    resp = Member(kafka, group, [topic]).heartbeat(epoch=1)
    assert resp.error_code == UNKNOWN_MEMBER_ID


def test_range_assignor(kafka: RawKafka, topic: str) -> None:
    create(kafka, topic, partitions=5)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = sorted(
        (Member(kafka, group, [topic], server_assignor="range") for _ in range(2)),
        key=lambda m: m.member_id,
    )
    for m in members:
        assert m.heartbeat().error_code == NONE
    d = _describe(kafka, group)
    assert d.assignor_name == "range"
    targets = {
        m.member_id: [list(tp.partitions) for tp in m.target_assignment.topic_partitions]
        for m in d.members
    }
    assert targets == {members[0].member_id: [[0, 1, 2]], members[1].member_id: [[3, 4]]}


def test_offsets_at_the_member_epoch(kafka: RawKafka, topic: str) -> None:
    create(kafka, topic, partitions=1)
    meta = {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False}
    topic_id = kafka.request(3, 12, meta).topics[0].topic_id  # v10 names topics by id
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = Member(kafka, group, [topic])
    assert a.heartbeat().member_epoch == 1

    def commit(version: int, epoch: int, member_id: str) -> int:
        resp = kafka.request(
            OFFSET_COMMIT,
            version,
            {
                "group_id": group,
                "generation_id_or_member_epoch": epoch,
                "member_id": member_id,
                "group_instance_id": None,
                "topics": [
                    {
                        "name": topic,
                        "topic_id": topic_id,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 7,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "m",
                            }
                        ],
                    }
                ],
            },
        )
        return resp.topics[0].partitions[0].error_code

    assert commit(9, 2, a.member_id) == STALE_MEMBER_EPOCH
    assert commit(9, 1, "nobody") == UNKNOWN_MEMBER_ID
    assert commit(8, 1, a.member_id) == UNSUPPORTED_VERSION
    assert commit(9, 1, a.member_id) == NONE
    assert commit(10, 2, a.member_id) == STALE_MEMBER_EPOCH
    assert commit(10, 1, "nobody") == UNKNOWN_MEMBER_ID
    assert commit(10, 1, a.member_id) == NONE

    def fetch(member_id: str | None, epoch: int, version: int = 9) -> Any:
        resp = kafka.request(
            OFFSET_FETCH,
            version,
            {
                "groups": [
                    {
                        "group_id": group,
                        "member_id": member_id,
                        "member_epoch": epoch,
                        "topics": [{"name": topic, "topic_id": topic_id, "partition_indexes": [0]}],
                    }
                ],
                "require_stable": True,
            },
        )
        return resp.groups[0]

    got = fetch(a.member_id, 1)
    assert (got.error_code, got.topics[0].partitions[0].committed_offset) == (NONE, 7)
    assert fetch(a.member_id, 3).error_code == STALE_MEMBER_EPOCH
    got = fetch(None, -1)  # an admin client
    assert (got.error_code, got.topics[0].partitions[0].committed_offset) == (NONE, 7)
    got = fetch(a.member_id, 1, 10)
    assert (got.error_code, got.topics[0].topic_id) == (NONE, topic_id)
    assert got.topics[0].partitions[0].committed_offset == 7
    assert fetch(a.member_id, 3, 10).error_code == STALE_MEMBER_EPOCH


def test_static_member_leaves_for_a_while(kafka: RawKafka, topic: str) -> None:
    create(kafka, topic, partitions=2)
    tid = _topic_id(kafka, topic)
    group = f"g-{uuid.uuid4().hex[:8]}"
    a = Member(kafka, group, [topic], instance_id="i-1")
    assert a.heartbeat().member_epoch == 1
    other = Member(kafka, group, [topic], instance_id="i-1")
    assert other.heartbeat().error_code == UNRELEASED_INSTANCE_ID
    resp = a.heartbeat(epoch=-2, instance_id="i-1")
    assert (resp.error_code, resp.member_epoch) == (NONE, -2)
    # Back under a new member id: the old assignment and epoch, no new group epoch.
    resp = other.heartbeat()
    assert (resp.error_code, resp.member_epoch, other.owned) == (NONE, 1, {tid: [0, 1]})
    d = _describe(kafka, group)
    assert (d.group_epoch, [m.member_id for m in d.members]) == (1, [other.member_id])
    # ... and its target assignment, so the next rebalance is sticky for it.
    [back] = d.members
    assert [list(tp.partitions) for tp in back.target_assignment.topic_partitions] == [[0, 1]]


@pytest.fixture
def own_skiff(own_redis: RedisServer, tmp_path: Path) -> Iterator[Skiff]:
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--group-consumer-session-timeout-ms",
        "1500",
        "--group-consumer-heartbeat-interval-ms",
        str(HEARTBEAT_MS),
    )
    yield server
    stop_process(server.proc)


def test_session_expiry_frees_partitions(own_skiff: Skiff, topic: str) -> None:
    with RawKafka("127.0.0.1", own_skiff.port) as kafka:
        create(kafka, topic, partitions=4)
        group = f"g-{uuid.uuid4().hex[:8]}"
        a, b = Member(kafka, group, [topic]), Member(kafka, group, [topic])
        assert a.heartbeat().heartbeat_interval.total_seconds() * 1000 == HEARTBEAT_MS
        b.heartbeat()
        a.heartbeat()
        a.heartbeat(owned=True)
        b.heartbeat()
        assert (a.partitions(), b.partitions()) == ([0, 1], [2, 3])
        started = time.monotonic()

        # Only A heartbeats: B's session (1.5 s) ends and A gets everything.
        def a_has_all() -> bool:
            a.heartbeat()
            return a.partitions() == [0, 1, 2, 3]

        _wait(a_has_all, 15, "B's session to expire")
        assert time.monotonic() - started >= 1.4
        assert [m.member_id for m in _describe(kafka, group).members] == [a.member_id]
        assert b.heartbeat().error_code == UNKNOWN_MEMBER_ID


def test_coordinator_move_keeps_the_group(
    own_redis: RedisServer, tmp_path: Path, topic: str
) -> None:
    first = start_skiff(tmp_path / "a.log", "--redis-url", own_redis.url)
    try:
        with RawKafka("127.0.0.1", first.port) as kafka:
            create(kafka, topic, partitions=4)
            group = f"g-{uuid.uuid4().hex[:8]}"
            a, b = Member(kafka, group, [topic]), Member(kafka, group, [topic])
            a.heartbeat()
            b.heartbeat()
            a.heartbeat()  # asked to revoke 2, 3: Reconciling across the move
            before = _describe(kafka, group)
    finally:
        stop_process(first.proc)  # SIGTERM: the lease is released
    second = start_skiff(tmp_path / "b.log", "--redis-url", own_redis.url)
    try:
        with RawKafka("127.0.0.1", second.port) as kafka:
            a.kafka = b.kafka = kafka
            after = _describe(kafka, group)
            assert (after.group_state, after.group_epoch, after.assignment_epoch) == (
                "Reconciling",
                2,
                2,
            )
            assert after.members == before.members
            resp = a.heartbeat(owned=True)
            assert (resp.error_code, resp.member_epoch, a.partitions()) == (NONE, 2, [0, 1])
            resp = b.heartbeat()
            assert (resp.error_code, resp.member_epoch, b.partitions()) == (NONE, 2, [2, 3])
    finally:
        stop_process(second.proc)


def test_v0_coordinator_names_the_member(kafka: RawKafka, topic: str) -> None:
    create(kafka, topic, partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    body = {
        "group_id": group,
        "member_id": "",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": [topic],
        "server_assignor": None,
        "topic_partitions": [],
    }
    resp = kafka.request(CG_HEARTBEAT, 0, body)
    assert (resp.error_code, resp.member_epoch) == (NONE, 1)
    assert str(uuid.UUID(resp.member_id)) == resp.member_id
    assert [list(tp.partitions) for tp in resp.assignment.topic_partitions] == [[0]]


def test_a_share_group_is_not_a_consumer_group(skiff: Skiff, kafka: RawKafka, topic: str) -> None:
    from share_raw import ShareMember

    create(kafka, topic, partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    share = ShareMember("127.0.0.1", skiff.port, group)
    try:
        assert share.heartbeat(0, [topic]).error_code == NONE
    finally:
        share.close()
    resp = Member(kafka, group, [topic]).heartbeat()
    assert (resp.error_code, resp.error_message) == (
        GROUP_ID_NOT_FOUND,
        f"Group {group} is not a consumer group.",
    )


def test_uniform_assignor_balances_and_sticks() -> None:
    from sidecar.groups.consumer_group import uniform_assign

    parts = {"a": 6, "b": 3}
    first = uniform_assign({"m1": ["a", "b"], "m2": ["a", "b"]}, parts, {})
    assert sorted(sum(len(ps) for ps in a.values()) for a in first.values()) == [4, 5]
    second = uniform_assign({"m1": ["a", "b"], "m2": ["a", "b"], "m3": ["a", "b"]}, parts, first)
    assert [sum(len(ps) for ps in second[m].values()) for m in ("m1", "m2", "m3")] == [3, 3, 3]
    kept = {
        (m, t, p)
        for m in ("m1", "m2")
        for t, ps in second[m].items()
        for p in ps
        if p in first[m].get(t, [])
    }
    assert len(kept) == 6  # only what m3 takes moves
    # Heterogeneous: the member that can only read "a" gets both of its partitions.
    got = uniform_assign({"m1": ["a"], "m2": ["a", "b"]}, {"a": 2, "b": 2}, {})
    assert got == {"m1": {"a": [0, 1]}, "m2": {"b": [0, 1]}}


def test_regex_subscription_resolves_and_follows_new_topics(kafka: RawKafka) -> None:
    # The broker resolves SubscribedTopicRegex (a whole-name match, as RE2/J's
    # matches()), re-resolves it so a topic created later is assigned, and "" drops it.
    prefix = f"rx{uuid.uuid4().hex[:8]}"
    group = f"g-{uuid.uuid4().hex[:8]}"
    first, later, other = f"{prefix}-a", f"{prefix}-b", f"x{prefix}-c"
    create(kafka, first, partitions=2)
    create(kafka, other, partitions=1)
    regex = f"{prefix}.*"
    m = Member(kafka, group, [], subscribed_topic_names=None, subscribed_topic_regex=regex)
    resp = m.heartbeat()
    assert (resp.error_code, resp.member_epoch) == (NONE, 1)
    assert m.owned == {_topic_id(kafka, first): [0, 1]}
    desc = _describe(kafka, group).members[0]
    assert (desc.subscribed_topic_regex, list(desc.subscribed_topic_names)) == (regex, [])
    assert [(t.topic_name, list(t.partitions)) for t in desc.assignment.topic_partitions] == [
        (first, [0, 1])
    ]
    create(kafka, later, partitions=3)
    later_id = _topic_id(kafka, later)

    def has_later() -> bool:
        assert m.heartbeat(owned=True).error_code == NONE
        return later_id in m.owned

    _wait(has_later, 30, f"{later} in the assignment")
    assert m.owned == {_topic_id(kafka, first): [0, 1], later_id: [0, 1, 2]}
    # "" clears the regex: nothing is subscribed any more.
    resp = m.heartbeat(owned=True, subscribed_topic_regex="")
    assert resp.error_code == NONE
    _wait(lambda: m.heartbeat(owned=True).error_code == NONE and not m.owned, 30, "no partitions")
    desc = _describe(kafka, group).members[0]
    assert (desc.subscribed_topic_regex, list(desc.assignment.topic_partitions)) == (None, [])


def test_regex_member_survives_its_saved_document() -> None:
    # The group document in Redis keeps the regex apart from the named topics, and the
    # assignor's input is both.
    from sidecar.groups.consumer_group import CgMember, ConsumerGroupState

    member = CgMember("m1", topics=["named"], regex="rx.*", matched=["rx-a", "named"])
    back = CgMember.from_doc(member.doc())
    assert (back.topics, back.regex, back.matched) == (["named"], "rx.*", ["rx-a", "named"])
    cg = ConsumerGroupState(partitions={"named": 1, "rx-a": 2})
    cg.add(back)
    cg.compute_target()
    assert (cg.subscribed(), cg.target) == (
        {"named", "rx-a"},
        {"m1": {"named": [0], "rx-a": [0, 1]}},
    )


def _alter_group(kafka: RawKafka, group: str, *configs: tuple[str, int, str | None]) -> Any:
    """IncrementalAlterConfigs of one GROUP resource: (name, operation, value)..."""
    body = {
        "resources": [
            {
                "resource_type": 32,
                "resource_name": group,
                "configs": [
                    {"name": n, "config_operation": op, "value": v} for n, op, v in configs
                ],
            }
        ],
        "validate_only": False,
    }
    [answer] = kafka.request(44, 1, body).responses
    return answer.error_code, answer.error_message


def _consumer_configs(kafka: RawKafka, group: str) -> list[tuple[str, str, int]]:
    body = {
        "resources": [{"resource_type": 32, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    [r] = kafka.request(32, 4, body).results
    assert r.error_code == 0
    return sorted(
        (c.name, c.value, c.config_source)
        for c in r.configs
        if c.name in ("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms")
    )


def test_group_configs_set_the_heartbeat_interval_and_are_checked(
    kafka: RawKafka, topic: str
) -> None:
    """consumer.heartbeat.interval.ms and consumer.session.timeout.ms through
    IncrementalAlterConfigs, as a Kafka 4.4.0 broker answers them: bounds with its
    messages, described as GROUP_CONFIG (8) where set, DEFAULT_CONFIG (5) otherwise, and
    the heartbeat interval a member is told follows the group's."""
    create(kafka, topic, partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    hb, session = "consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"
    assert _consumer_configs(kafka, group) == [(hb, "5000", 5), (session, "45000", 5)]
    for name, value, message in (
        (hb, "4999", f"{hb} must be in the range 5000 to 15000 inclusive."),
        (hb, "15001", f"{hb} must be in the range 5000 to 15000 inclusive."),
        (session, "44999", f"{session} must be in the range 45000 to 60000 inclusive."),
        (session, "60001", f"{session} must be in the range 45000 to 60000 inclusive."),
        (session, "0", f"Invalid value 0 for configuration {session}: Value must be at least 1"),
        (hb, "often", f"Invalid value often for configuration {hb}: Not a number of type INT"),
    ):
        assert _alter_group(kafka, group, (name, 0, value)) == (40, message)
    assert _alter_group(kafka, group, (hb, 0, "7000"), (session, 0, "50000")) == (0, None)
    assert _consumer_configs(kafka, group) == [(hb, "7000", 8), (session, "50000", 8)]
    member = Member(kafka, group, [topic])
    assert member.heartbeat().heartbeat_interval.total_seconds() * 1000 == 7000
    assert _alter_group(kafka, group, (hb, 1, None)) == (0, None)  # DELETE: the default
    assert _consumer_configs(kafka, group) == [(hb, "5000", 5), (session, "50000", 8)]
    assert member.heartbeat().heartbeat_interval.total_seconds() * 1000 == 5000


def test_a_group_session_timeout_outlasts_the_server_default(own_skiff: Skiff, topic: str) -> None:
    """The server's session timeout is 1.5 s here; a group that sets 45 s keeps a silent
    member well past 1.5 s."""
    with RawKafka("127.0.0.1", own_skiff.port) as kafka:
        create(kafka, topic, partitions=2)
        group = f"g-{uuid.uuid4().hex[:8]}"
        assert _alter_group(kafka, group, ("consumer.session.timeout.ms", 0, "45000")) == (0, None)
        a, b = Member(kafka, group, [topic]), Member(kafka, group, [topic])
        a.heartbeat()
        b.heartbeat()
        silent_since = time.monotonic()
        while time.monotonic() - silent_since < 4.0:  # only A heartbeats, for 4 s
            a.heartbeat(owned=True)
            time.sleep(HEARTBEAT_MS / 1000)
        members = {m.member_id for m in _describe(kafka, group).members}
        assert members == {a.member_id, b.member_id}
        assert b.heartbeat().error_code == NONE


def test_kafka_configs_cli_sets_and_describes_group_configs(skiff: Skiff) -> None:
    """Kafka 4.x's `kafka-configs --entity-type groups` against Skiff."""
    from kafka_tools import ADMIN_KAFKA_VERSION, run_batch

    group = f"g-cli-{uuid.uuid4().hex[:8]}"
    common = ["--bootstrap-server", skiff.bootstrap, "--entity-type", "groups"]
    altered, described, listed = run_batch(
        ADMIN_KAFKA_VERSION,
        "kafka-configs",
        [
            [
                *common,
                "--entity-name",
                group,
                "--alter",
                "--add-config",
                "consumer.heartbeat.interval.ms=6000,consumer.session.timeout.ms=50000",
            ],
            [*common, "--entity-name", group, "--describe"],
            [*common, "--describe"],
        ],
    )
    assert altered.returncode == 0, altered.stdout + altered.stderr
    assert f"Completed updating config for group {group}." in altered.stdout
    expected = (  # the group's value, then the broker's default (Kafka 4.4's synonyms)
        f"Dynamic configs for group {group} are:\n"
        "  consumer.heartbeat.interval.ms=6000 sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=6000, "
        "DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}\n"
        "  consumer.session.timeout.ms=50000 sensitive=false "
        "synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, "
        "DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}\n"
    )
    assert described.returncode == 0 and expected in described.stdout, described.stdout
    assert listed.returncode == 0 and expected in listed.stdout, listed.stdout
