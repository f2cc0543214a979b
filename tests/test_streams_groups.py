"""KIP-1071 streams groups over the raw protocol: StreamsGroupHeartbeat (88) and
StreamsGroupDescribe (89), v0 and v1. The expected answers (error codes and messages,
status codes and details, describe fields, the other group APIs' answers about a
streams group) were taken from a Kafka 4.4.0 broker running the same sequence
(tests/kafka_tools.reference_kafka); where Skiff differs on purpose (no initial
rebalance delay or assignment interval, so no ASSIGNMENT_DELAYED status and one group
epoch fewer) the test says so."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import create
from rawkafka import RawKafka

INVALID_REQUEST, UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND = 42, 25, 69
FENCED_MEMBER_EPOCH, STALE_MEMBER_EPOCH, UNSUPPORTED_VERSION = 110, 113, 35
MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS = 1, 3


def topology(source: str, changelog: str | None = None, epoch: int = 0) -> dict[str, Any]:
    changelogs = []
    if changelog is not None:
        changelogs = [
            {
                "name": changelog,
                "partitions": 0,
                "replication_factor": 0,
                "topic_configs": [{"key": "cleanup.policy", "value": "compact"}],
            }
        ]
    return {
        "epoch": epoch,
        "subtopologies": [
            {
                "subtopology_id": "0",
                "source_topics": [source],
                "source_topic_regex": [],
                "state_changelog_topics": changelogs,
                "repartition_sink_topics": [],
                "repartition_source_topics": [],
                "copartition_groups": [],
            }
        ],
    }


def tasks(*partitions: int) -> list[dict[str, Any]]:
    return [{"subtopology_id": "0", "partitions": list(partitions)}] if partitions else []


def heartbeat(
    kafka: RawKafka,
    version: int,
    group: str,
    member: str,
    epoch: int,
    topo: dict[str, Any] | None = None,
    active: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> Any:
    body = {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "endpoint_information_epoch": 0,
        "rebalance_timeout": 30000 if epoch == 0 else -1,
        "topology": topo,
        "active_tasks": active,
        "standby_tasks": None if active is None else [],
        "warmup_tasks": None if active is None else [],
        "process_id": None,
        "user_endpoint": None,
        "client_tags": None,
        "task_offsets": None,
        "task_end_offsets": None,
        **extra,
    }
    return kafka.request(88, version, body)


def active(resp: Any) -> list[tuple[str, list[int]]] | None:
    if resp.active_tasks is None:
        return None
    return [(t.subtopology_id, list(t.partitions)) for t in resp.active_tasks]


def status(resp: Any) -> list[tuple[int, str]]:
    return [(s.status_code, s.status_detail) for s in resp.status]


def describe(kafka: RawKafka, version: int, group: str) -> Any:
    resp = kafka.request(
        89, version, {"group_ids": [group], "include_authorized_operations": False}
    )
    return resp.groups[0]


def members(group: Any) -> list[tuple[int, list[int], list[int]]]:
    """(epoch, current partitions, target partitions) per member, by member id."""
    out = []
    for m in sorted(group.members, key=lambda m: m.member_id):
        current = [p for t in m.assignment.active_tasks for p in t.partitions]
        target = [p for t in m.target_assignment.active_tasks for p in t.partitions]
        out.append((m.member_epoch, current, target))
    return out


@pytest.fixture
def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"src-{suffix}", f"app-{suffix}"


@pytest.mark.parametrize("version", [0, 1])
def test_request_checks_and_unknown_groups_as_kafka(
    skiff: Skiff, names: tuple[str, str], version: int
) -> None:
    source, group = names
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        checks = [
            (heartbeat(kafka, version, group, "", 0, topology(source)), "MemberId can't be empty."),
            (
                heartbeat(kafka, version, group, "m1", 0, None, active=[]),
                "Topology must be non-null when (re-)joining.",
            ),
            (
                heartbeat(kafka, version, group, "m1", 0, topology(source), rebalance_timeout=-1),
                "RebalanceTimeoutMs must be provided in first request.",
            ),
            (
                heartbeat(kafka, version, group, "m1", -3),
                "MemberEpoch is -3, but must be greater than or equal to -2.",
            ),
            (
                heartbeat(kafka, version, group, "m1", 0, topology(source), active=tasks(0)),
                "ActiveTasks must be empty when (re-)joining.",
            ),
        ]
        for resp, message in checks:
            assert (resp.error_code, resp.error_message) == (INVALID_REQUEST, message)
            assert (resp.member_epoch, resp.status, resp.active_tasks) == (0, (), None)
            if version >= 1:
                assert resp.acceptable_recovery_lag == -1
        resp = heartbeat(kafka, version, group, "m1", 1, active=[])
        assert (resp.error_code, resp.error_message) == (
            GROUP_ID_NOT_FOUND,
            f"Streams group {group} not found.",
        )
        described = describe(kafka, version, group)
        assert (described.error_code, described.error_message) == (
            GROUP_ID_NOT_FOUND,
            f"Group {group} not found.",
        )
        assert (described.group_state, described.group_epoch, described.topology) == ("", 0, None)


@pytest.mark.parametrize("version", [0, 1])
def test_missing_source_topics_leave_the_group_not_ready(
    skiff: Skiff, names: tuple[str, str], version: int
) -> None:
    source, group = names
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        resp = heartbeat(kafka, version, group, "m1", 0, topology(source), active=[])
        assert (resp.error_code, resp.member_epoch, resp.heartbeat_interval.total_seconds()) == (
            0,
            1,
            5.0,
        )
        # Kafka 4.4 adds (5, "Assignment delayed due to the configured initial rebalance
        # delay."): Skiff assigns at once.
        assert status(resp) == [(MISSING_SOURCE_TOPICS, f"Source topics {source} are missing.")]
        assert active(resp) == []
        assert resp.acceptable_recovery_lag == (10000 if version >= 1 else 0)
        assert resp.task_offset_interval.total_seconds() == 60
        assert (resp.endpoint_information_epoch, resp.partitions_by_user_endpoint) == (0, None)
        described = describe(kafka, version, group)
        assert (described.error_code, described.group_state) == (0, "NotReady")
        assert described.topology.subtopologies[0].source_topics == (source,)
        # The topic appears: the next heartbeat assigns its tasks.
        create(kafka, source, partitions=2)
        resp = heartbeat(kafka, version, group, "m1", 1, active=[])
        assert (resp.error_code, status(resp), active(resp)) == (0, [], [("0", [0, 1])])
        assert resp.member_epoch == 2
        assert heartbeat(kafka, version, group, "m1", 2, active=tasks(0, 1)).error_code == 0
        assert describe(kafka, version, group).group_state == "Stable"


@pytest.mark.parametrize("version", [0, 1])
def test_internal_topics_created_tasks_reconciled_and_groups_apis(
    skiff: Skiff, names: tuple[str, str], version: int
) -> None:
    source, group = names
    changelog = f"{group}-store-changelog"
    topo = topology(source, changelog)
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, source, partitions=3)
        resp = heartbeat(kafka, version, group, "m1", 0, topo, active=[], process_id="p1")
        assert status(resp) == [
            (MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {changelog}")
        ]
        assert (resp.member_epoch, active(resp)) == (1, [])
        # The broker created the changelog with the source's partition count.
        meta = kafka.request(3, 12, {"topics": [{"name": changelog}]})
        assert [len(t.partitions) for t in meta.topics] == [3]
        resp = heartbeat(kafka, version, group, "m1", 1, active=[])
        assert (status(resp), resp.member_epoch, active(resp)) == ([], 2, [("0", [0, 1, 2])])
        described = describe(kafka, version, group)
        assert (described.group_state, described.group_epoch, described.assignment_epoch) == (
            "Stable",
            2,
            2,
        )
        [sub] = described.topology.subtopologies
        [info] = sub.state_changelog_topics
        assert (info.name, info.partitions, info.replication_factor) == (changelog, 3, 0)
        assert [(c.key, c.value) for c in info.topic_configs] == [("cleanup.policy", "compact")]
        [m] = described.members
        assert (m.member_id, m.process_id, m.topology_epoch, m.is_classic) == ("m1", "p1", 0, False)
        if version >= 1:
            assert (described.assignor_name, described.topology_description_status) == (
                "sticky",
                0,
            )

        fenced = heartbeat(kafka, version, group, "m1", 7, active=None)
        assert (fenced.error_code, fenced.error_message) == (
            FENCED_MEMBER_EPOCH,
            "The streams group member has a greater member epoch (7) than the one known by "
            "the group coordinator (2). The member must abandon all its partitions and rejoin.",
        )
        unknown = heartbeat(kafka, version, group, "mX", 1, active=None)
        assert (unknown.error_code, unknown.error_message) == (
            UNKNOWN_MEMBER_ID,
            f"Member mX is not a member of group {group}.",
        )

        # A second member: m1 gives up one task first; m2 gets it only after that.
        resp2 = heartbeat(kafka, version, group, "m2", 0, topo, active=[], process_id="p2")
        assert (resp2.error_code, resp2.member_epoch, active(resp2)) == (0, 3, [])
        resp1 = heartbeat(kafka, version, group, "m1", 2, active=tasks(0, 1, 2))
        assert (resp1.member_epoch, active(resp1)) == (2, [("0", [0, 1])])
        assert members(describe(kafka, version, group)) == [(2, [0, 1], [0, 1]), (3, [], [2])]
        resp2 = heartbeat(kafka, version, group, "m2", 3, active=[])
        assert active(resp2) in (None, [])  # still held by m1
        resp1 = heartbeat(kafka, version, group, "m1", 2, active=tasks(0, 1))
        assert resp1.member_epoch == 3
        resp2 = heartbeat(kafka, version, group, "m2", 3, active=[])
        assert active(resp2) == [("0", [2])]
        described = describe(kafka, version, group)
        assert described.group_state == "Stable"
        assert members(described) == [(3, [0, 1], [0, 1]), (3, [2], [2])]

        # Offsets: a streams member commits at its epoch (OffsetCommit v9).
        def commit(member: str, epoch: int, version: int = 9) -> int:
            body = {
                "group_id": group,
                "generation_id_or_member_epoch": epoch,
                "member_id": member,
                "group_instance_id": None,
                "topics": [
                    {
                        "name": source,
                        "partitions": [
                            {
                                "partition_index": 2,
                                "committed_offset": 5,
                                "committed_leader_epoch": -1,
                                "committed_metadata": "",
                            }
                        ],
                    }
                ],
            }
            return kafka.request(8, version, body).topics[0].partitions[0].error_code

        assert commit("m2", 3, version=8) == UNSUPPORTED_VERSION
        assert commit("m2", 2) == STALE_MEMBER_EPOCH
        assert commit("mX", 3) == UNKNOWN_MEMBER_ID
        assert commit("m2", 3) == 0
        # OffsetDelete: the topology's topics are subscribed (Kafka's isSubscribedToTopic).
        deleted = kafka.request(
            47,
            0,
            {
                "group_id": group,
                "topics": [{"name": source, "partitions": [{"partition_index": 2}]}],
            },
        )
        assert (deleted.error_code, deleted.topics[0].partitions[0].error_code) == (0, 86)

        # The other group APIs, as Kafka 4.4 answers about a streams group.
        listed = kafka.request(16, 5, {"states_filter": [], "types_filter": ["streams"]})
        assert [
            (g.protocol_type, g.group_state, g.group_type)
            for g in listed.groups
            if g.group_id == group
        ] == [("streams", "Stable", "streams")]
        dg = kafka.request(15, 6, {"groups": [group], "include_authorized_operations": False})
        assert (dg.groups[0].error_code, dg.groups[0].error_message) == (
            GROUP_ID_NOT_FOUND,
            f"Group {group} is not a classic group.",
        )
        cg = kafka.request(69, 1, {"group_ids": [group], "include_authorized_operations": False})
        assert (cg.groups[0].error_code, cg.groups[0].error_message) == (
            GROUP_ID_NOT_FOUND,
            f"Group {group} is not a consumer group.",
        )
        assert cg.groups[0].group_state == ""
        consumer = kafka.request(
            68,
            1,
            {
                "group_id": group,
                "member_id": "c1",
                "member_epoch": 0,
                "rebalance_timeout": 10000,
                "subscribed_topic_names": [source],
                "topic_partitions": [],
            },
        )
        assert (consumer.error_code, consumer.error_message) == (
            GROUP_ID_NOT_FOUND,
            f"Group {group} is not a consumer group.",
        )
        assert kafka.request(42, 2, {"groups_names": [group]}).results[0].error_code == 68

        # Leaving: m2's task goes back to m1; the empty group can be deleted.
        left = heartbeat(kafka, version, group, "m2", -1, active=None)
        assert (left.error_code, left.member_epoch, left.heartbeat_interval.total_seconds()) == (
            0,
            -1,
            0,
        )
        resp1 = heartbeat(kafka, version, group, "m1", 3, active=None)
        assert (resp1.member_epoch, active(resp1)) == (4, [("0", [0, 1, 2])])
        assert heartbeat(kafka, version, group, "m1", -1, active=None).member_epoch == -1
        described = describe(kafka, version, group)
        assert (described.group_state, described.members) == ("Empty", ())
        assert kafka.request(42, 2, {"groups_names": [group]}).results[0].error_code == 0
        assert describe(kafka, version, group).error_code == GROUP_ID_NOT_FOUND


def test_coordinator_move_keeps_the_streams_group(
    own_redis: RedisServer, tmp_path: Path, names: tuple[str, str]
) -> None:
    """The group's topology, epochs and a reconciliation in progress live in Redis: a
    sidecar taking the group over carries on where the first stopped."""
    source, group = names
    first = start_skiff(tmp_path / "a.log", "--redis-url", own_redis.url)
    try:
        with RawKafka("127.0.0.1", first.port) as kafka:
            create(kafka, source, partitions=4)
            topo = topology(source)
            assert active(heartbeat(kafka, 1, group, "m1", 0, topo, active=[])) == [
                ("0", [0, 1, 2, 3])
            ]
            assert heartbeat(kafka, 1, group, "m2", 0, topo, active=[]).member_epoch == 2
            resp = heartbeat(kafka, 1, group, "m1", 1, active=tasks(0, 1, 2, 3))
            assert active(resp) == [("0", [0, 1])]  # revoking 2, 3 across the move
            before = describe(kafka, 1, group)
    finally:
        stop_process(first.proc)  # SIGTERM: the lease is released
    second = start_skiff(tmp_path / "b.log", "--redis-url", own_redis.url)
    try:
        with RawKafka("127.0.0.1", second.port) as kafka:
            after = describe(kafka, 1, group)
            assert (after.group_state, after.group_epoch, after.assignment_epoch) == (
                "Reconciling",
                2,
                2,
            )
            assert after.members == before.members and after.topology == before.topology
            resp = heartbeat(kafka, 1, group, "m1", 1, active=tasks(0, 1))
            assert (resp.error_code, resp.member_epoch) == (0, 2)
            resp = heartbeat(kafka, 1, group, "m2", 2, active=[])
            assert (resp.error_code, active(resp)) == (0, [("0", [2, 3])])
            assert describe(kafka, 1, group).group_state == "Stable"
    finally:
        stop_process(second.proc)


def test_shutdown_application_reaches_every_member(skiff: Skiff, names: tuple[str, str]) -> None:
    """ShutdownApplication from one member: every member's answers carry the
    SHUTDOWN_APPLICATION status (Kafka's text) until the group is empty."""
    source, group = names
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, source, partitions=2)
        topo = topology(source)
        heartbeat(kafka, 1, group, "m1", 0, topo, active=[])
        heartbeat(kafka, 1, group, "m2", 0, topo, active=[])
        assert status(heartbeat(kafka, 1, group, "m1", 1, active=None)) == []
        expected = [
            (
                4,
                "Streams group member m1 encountered a fatal error and requested a shutdown "
                "for the entire application.",
            )
        ]
        resp = heartbeat(kafka, 1, group, "m1", 1, active=None, shutdown_application=True)
        assert (resp.error_code, status(resp)) == (0, expected)
        resp = heartbeat(kafka, 1, group, "m2", 2, active=None)
        assert (resp.error_code, status(resp)) == (0, expected)
        heartbeat(kafka, 1, group, "m1", -1, active=None)
        heartbeat(kafka, 1, group, "m2", -1, active=None)
        resp = heartbeat(kafka, 1, group, "m3", 0, topo, active=[])
        assert (resp.error_code, status(resp)) == (0, [])


def test_standby_tasks_on_other_processes(own_redis: RedisServer, tmp_path: Path) -> None:
    """--group-streams-num-standby-replicas 1: each active task has one standby copy on a
    member of another process; members of one process get none of each other's."""
    source, group = f"src-{uuid.uuid4().hex[:8]}", f"app-{uuid.uuid4().hex[:8]}"
    sidecar = start_skiff(
        tmp_path / "s.log",
        "--redis-url",
        own_redis.url,
        "--group-streams-num-standby-replicas",
        "1",
    )
    try:
        with RawKafka("127.0.0.1", sidecar.port) as kafka:
            create(kafka, source, partitions=2)
            topo = topology(source)

            def standby(resp: Any) -> list[tuple[str, list[int]]]:
                return [(t.subtopology_id, list(t.partitions)) for t in resp.standby_tasks]

            resp = heartbeat(kafka, 1, group, "a", 0, topo, active=[], process_id="p1")
            assert (active(resp), standby(resp)) == ([("0", [0, 1])], [])
            resp = heartbeat(kafka, 1, group, "b", 0, topo, active=[], process_id="p1")
            assert (resp.member_epoch, active(resp), standby(resp)) == (2, [], [])
            resp = heartbeat(kafka, 1, group, "a", 1, active=tasks(0, 1))
            assert active(resp) == [("0", [0])]  # revokes 1; b is the same process: no standby
            assert standby(resp) == []
            heartbeat(kafka, 1, group, "a", 1, active=tasks(0))
            resp = heartbeat(kafka, 1, group, "b", 2, active=[])
            assert (active(resp), standby(resp)) == ([("0", [1])], [])
            # A member of another process: standby copies of the others' tasks.
            resp = heartbeat(kafka, 1, group, "c", 0, topo, active=[], process_id="p2")
            assert resp.member_epoch == 3
            described = describe(kafka, 1, group)
            by_member = {
                m.member_id: (
                    [p for t in m.target_assignment.active_tasks for p in t.partitions],
                    [p for t in m.target_assignment.standby_tasks for p in t.partitions],
                )
                for m in described.members
            }
            actives = sorted(p for a, _ in by_member.values() for p in a)
            assert actives == [0, 1]
            # Each task's standby is on a member of the process that does not run it.
            process = {"a": "p1", "b": "p1", "c": "p2"}
            for member, (_, standbys) in by_member.items():
                for p in standbys:
                    runner = next(m for m, (a, _) in by_member.items() if p in a)
                    assert process[runner] != process[member], by_member
            assert sorted(p for _, s in by_member.values() for p in s) == [0, 1]
    finally:
        stop_process(sidecar.proc)


def test_other_group_types_are_not_streams_groups(skiff: Skiff, names: tuple[str, str]) -> None:
    """As Kafka 4.4: a consumer group, even empty, and a classic group with members are
    GROUP_ID_NOT_FOUND "not a streams group"; an empty classic group becomes one."""
    source, group = names
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, source, partitions=2)
        consumer = {
            "group_id": group,
            "member_id": "c1",
            "member_epoch": 0,
            "rebalance_timeout": 10000,
            "subscribed_topic_names": [source],
            "topic_partitions": [],
        }
        assert kafka.request(68, 1, consumer).error_code == 0
        expected = (GROUP_ID_NOT_FOUND, f"Group {group} is not a streams group.")
        resp = heartbeat(kafka, 1, group, "m1", 0, topology(source), active=[])
        assert (resp.error_code, resp.error_message) == expected
        leave = {**consumer, "member_epoch": -1, "subscribed_topic_names": None}
        assert kafka.request(68, 1, leave).error_code == 0
        resp = heartbeat(kafka, 1, group, "m1", 0, topology(source), active=[])
        assert (resp.error_code, resp.error_message) == expected


def test_static_member_steps_out_and_comes_back(skiff: Skiff, names: tuple[str, str]) -> None:
    """A static member (instance id) leaving with epoch -2 keeps its tasks. A new member
    id with that instance id gets UNRELEASED_INSTANCE_ID while the old one is active,
    and after it stepped out takes over its place, epoch and tasks without a new group
    epoch."""
    source, group = names
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, source, partitions=2)
        topo = topology(source)
        resp = heartbeat(kafka, 1, group, "a", 0, topo, active=[], instance_id="i1")
        assert (resp.member_epoch, active(resp)) == (1, [("0", [0, 1])])
        resp = heartbeat(kafka, 1, group, "b", 0, topo, active=[], instance_id="i1")
        assert (resp.error_code, resp.error_message) == (
            111,
            "Static member i1 has not released its assignment.",
        )
        resp = heartbeat(kafka, 1, group, "a", -2, active=None, instance_id="i1")
        assert (resp.error_code, resp.member_epoch) == (0, -2)
        resp = heartbeat(kafka, 1, group, "b", 0, topo, active=[], instance_id="i1")
        assert (resp.error_code, resp.member_epoch, active(resp)) == (0, 1, [("0", [0, 1])])
        described = describe(kafka, 1, group)
        assert (described.group_epoch, [m.member_id for m in described.members]) == (1, ["b"])


def test_streams_group_configs_apply(skiff: Skiff, names: tuple[str, str]) -> None:
    """The group configs streams.num.standby.replicas and streams.heartbeat.interval.ms
    (IncrementalAlterConfigs on the GROUP resource, as `kafka-configs --entity-type
    groups`) apply to that group alone."""
    source, group = names
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, source, partitions=2)
        configs = [
            {"name": "streams.num.standby.replicas", "config_operation": 0, "value": "1"},
            {"name": "streams.heartbeat.interval.ms", "config_operation": 0, "value": "6000"},
        ]
        body = {
            "resources": [{"resource_type": 32, "resource_name": group, "configs": configs}],
            "validate_only": False,
        }
        assert kafka.request(44, 1, body).responses[0].error_code == 0
        topo = topology(source)
        resp = heartbeat(kafka, 1, group, "a", 0, topo, active=[], process_id="p1")
        assert (active(resp), resp.heartbeat_interval.total_seconds()) == ([("0", [0, 1])], 6)
        heartbeat(kafka, 1, group, "c", 0, topo, active=[], process_id="p2")
        standbys = {
            m.member_id: [p for t in m.target_assignment.standby_tasks for p in t.partitions]
            for m in describe(kafka, 1, group).members
        }
        # Each active task has one standby copy, on the other process's member.
        assert sorted(p for ps in standbys.values() for p in ps) == [0, 1]
        # Another group keeps the server's defaults: no standbys, 5 s heartbeats.
        other = f"{group}-x"
        resp = heartbeat(kafka, 1, other, "a", 0, topo, active=[], process_id="p1")
        assert resp.heartbeat_interval.total_seconds() == 5
        heartbeat(kafka, 1, other, "c", 0, topo, active=[], process_id="p2")
        assert all(not m.target_assignment.standby_tasks for m in describe(kafka, 1, other).members)


def test_topology_descriptions_as_kafka_without_a_plugin(
    skiff: Skiff, names: tuple[str, str]
) -> None:
    """KIP-1331 as Kafka 4.4.0 answers by default (no
    group.streams.topology.description.plugin.class, and Kafka ships none): a heartbeat
    never asks for a description, StreamsGroupTopologyDescriptionUpdate (93) is
    UNSUPPORTED_VERSION with the same message for any group, member or topology epoch
    (checked before the request's own fields), and describe v1 shows no description:
    NOT_STORED when asked for, NOT_REQUESTED otherwise. Kafka's answers were taken by
    sending this sequence to a Kafka 4.4.0 broker."""
    source, group = names
    no_plugin = (
        UNSUPPORTED_VERSION,
        "The broker has no streams group topology description plugin configured.",
    )
    node = {
        "name": "KSTREAM-SOURCE-0000000000",
        "node_type": 1,
        "source_topics": [source],
        "sink_topic": None,
        "stores": [],
        "successors": [],
    }
    description = {
        "subtopologies": [{"subtopology_id": "0", "nodes": [node]}],
        "global_stores": [],
    }

    def update(group_id: str, member: str, epoch: int) -> tuple[int, str | None]:
        resp = kafka.request(
            93,
            0,
            {
                "group_id": group_id,
                "member_id": member,
                "topology_epoch": epoch,
                "topology_description": description,
            },
        )
        return resp.error_code, resp.error_message

    def described(include: bool) -> Any:
        body = {
            "group_ids": [group],
            "include_authorized_operations": False,
            "include_topology_description": include,
        }
        return kafka.request(89, 1, body).groups[0]

    with RawKafka("127.0.0.1", skiff.port) as kafka:
        assert update(group, "m1", 0) == no_plugin  # no such group yet
        create(kafka, source, partitions=2)
        resp = heartbeat(kafka, 1, group, "m1", 0, topology(source), active=[])
        assert (resp.error_code, resp.topology_description_required) == (0, False)
        for args in [(group, "m1", 0), (group, "other", 0), (group, "m1", 7), ("", "", -1)]:
            assert update(*args) == no_plugin
        resp = heartbeat(kafka, 1, group, "m1", resp.member_epoch, active=[])
        assert (resp.error_code, resp.topology_description_required) == (0, False)
        asked = described(True)
        assert (asked.error_code, asked.topology_description_status) == (0, 1)  # NOT_STORED
        assert asked.topology_description is None
        plain = described(False)
        assert (plain.topology_description_status, plain.topology_description) == (0, None)
