"""Kafka Streams 4.2 with `group.protocol=streams` (KIP-1071) against Skiff, unmodified:
tests/java-streams' word count (a repartition topic and a changelog topic, both created
by the broker) joins a streams group through StreamsGroupHeartbeat, counts exactly
once, shares its tasks with a second instance and takes them all back when that one is
SIGKILLed, within the session timeout; and keeps counting exactly once when the sidecar
coordinating its group dies."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clients.java_streams_client import wordcount_cmd
from confluent_kafka import Producer
from groups_harness import FAILOVER_ENV, SkiffCluster, create_topic
from rawkafka import RawKafka
from test_transactions_java import WordCount, _counts

SESSION_MS = 6000
ENV = {
    **FAILOVER_ENV,
    "SKIFF_GROUP_CONSUMER_SESSION_TIMEOUT_MS": str(SESSION_MS),
    "SKIFF_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": "1000",
}
WORDS = [b"w%d" % i for i in range(7)]
PARTITIONS = 4


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SkiffCluster]:
    started = SkiffCluster(tmp_path / "cluster", sidecars=1, env=ENV)
    yield started
    started.stop()


def coordinator(cluster: SkiffCluster, group: str) -> int:
    """The node id coordinating a group (FindCoordinator v4 on a live sidecar)."""
    port = next(p for n, p in cluster.nodes.items() if cluster.alive(n))
    with RawKafka("127.0.0.1", port) as kafka:
        resp = kafka.request(10, 4, {"key_type": 0, "coordinator_keys": [group]})
    return resp.coordinators[0].node_id


def describe(cluster: SkiffCluster, group: str) -> Any:
    """StreamsGroupDescribe v0 of one group, from its coordinator."""
    port = cluster.nodes[coordinator(cluster, group)]
    with RawKafka("127.0.0.1", port) as kafka:
        resp = kafka.request(89, 0, {"group_ids": [group], "include_authorized_operations": False})
    return resp.groups[0]


def owned(group: Any) -> dict[str, int]:
    """Active tasks per member."""
    return {
        m.member_id: sum(len(t.partitions) for t in m.assignment.active_tasks)
        for m in group.members
    }


def wait_for(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}: {last!r}")


def produce(bootstrap: str, topic: str, start: int, n: int) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(start, start + n):
        producer.produce(topic, WORDS[i % len(WORDS)])
    producer.flush(60)
    return start + n


def expected(sent: int) -> dict[bytes, list[int]]:
    per = {w: sent // len(WORDS) + (1 if i < sent % len(WORDS) else 0) for i, w in enumerate(WORDS)}
    return {w: list(range(1, n + 1)) for w, n in per.items()}


def test_streams_group_counts_exactly_once_splits_and_fails_over(
    cluster: SkiffCluster, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, sink, app = f"words-{suffix}", f"counts-{suffix}", f"wc-{suffix}"
    create_topic(cluster.bootstrap, source, PARTITIONS)
    create_topic(cluster.bootstrap, sink, PARTITIONS)

    def argv(n: int) -> list[str]:
        return wordcount_cmd(
            cluster.bootstrap, app, source, sink, tmp_path / f"state{n}", protocol="streams"
        )

    first = WordCount(argv(1), tmp_path / "streams1.log")
    second = None
    try:
        first.wait_running()
        sent = produce(cluster.bootstrap, source, 0, 350)
        # One instance: every count 1..n once (exactly_once_v2).
        assert _counts(cluster.bootstrap, sink, PARTITIONS, sent) == expected(sent)
        group = describe(cluster, app)
        assert group.error_code == 0, group
        assert group.group_state == "Stable"
        assert len(group.members) == 1
        # The broker made the repartition and changelog topics.
        subs = group.topology.subtopologies
        assert len(subs) == 2
        internal = {t.name for s in subs for t in s.state_changelog_topics} | {
            t.name for s in subs for t in s.repartition_source_topics
        }
        assert len(internal) == 2 and all(n.startswith(app + "-") for n in internal)
        assert sum(owned(group).values()) == 2 * PARTITIONS

        second = WordCount(argv(2), tmp_path / "streams2.log")
        split = wait_for(
            "both instances to own tasks",
            lambda: (
                (o := owned(describe(cluster, app)))
                and len(o) == 2
                and all(o.values())
                and sum(o.values()) == 2 * PARTITIONS
                and o
            ),
            90,
        )
        assert sorted(split.values()) == [PARTITIONS, PARTITIONS]
        sent = produce(cluster.bootstrap, source, sent, 350)
        assert _counts(cluster.bootstrap, sink, PARTITIONS, sent) == expected(sent)

        second.kill()
        killed_at = time.monotonic()
        wait_for(
            "the survivor to own every task",
            lambda: (o := owned(describe(cluster, app))) == {next(iter(o), ""): 2 * PARTITIONS},
            SESSION_MS / 1000 + 30,
        )
        assert time.monotonic() - killed_at < SESSION_MS / 1000 + 30
        sent = produce(cluster.bootstrap, source, sent, 350)
        assert _counts(cluster.bootstrap, sink, PARTITIONS, sent) == expected(sent)
    finally:
        first.kill()
        if second is not None:
            second.kill()


def test_streams_group_survives_its_coordinator_sidecar_dying(tmp_path: Path) -> None:
    """Two sidecars; the one coordinating the streams group is SIGKILLed while the
    application runs: the other takes the group over from Redis (topology, epochs,
    assignment) and the counts stay exactly once."""
    cluster = SkiffCluster(tmp_path / "cluster", sidecars=2, env=ENV)
    suffix = uuid.uuid4().hex[:8]
    source, sink, app = f"words-{suffix}", f"counts-{suffix}", f"wc-{suffix}"
    instance = None
    try:
        create_topic(cluster.bootstrap, source, PARTITIONS)
        create_topic(cluster.bootstrap, sink, PARTITIONS)
        argv = wordcount_cmd(
            cluster.bootstrap, app, source, sink, tmp_path / "state", protocol="streams"
        )
        instance = WordCount(argv, tmp_path / "streams.log")
        instance.wait_running()
        sent = produce(cluster.bootstrap, source, 0, 300)
        assert _counts(cluster.bootstrap, sink, PARTITIONS, sent) == expected(sent)
        before = describe(cluster, app)
        assert before.group_state == "Stable"
        node = coordinator(cluster, app)
        cluster.kill(node)
        wait_for(
            "another sidecar to coordinate the group",
            lambda: coordinator(cluster, app) != node,
            30,
        )
        sent = produce(cluster.bootstrap, source, sent, 300)
        assert _counts(cluster.bootstrap, sink, PARTITIONS, sent) == expected(sent)
        after = describe(cluster, app)
        assert after.group_state == "Stable"
        assert [m.member_id for m in after.members] == [m.member_id for m in before.members]
        assert after.group_epoch == before.group_epoch
    finally:
        if instance is not None:
            instance.kill()
        cluster.stop()
