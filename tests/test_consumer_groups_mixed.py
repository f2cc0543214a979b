"""KIP-848 mixed groups: a classic group upgraded member by member to the consumer
protocol and back while its members consume and commit, with Kafka 4.x's Java
`VerifiableConsumer` (group.protocol classic and consumer in one group; it commits
synchronously after each poll, so every record must be processed exactly once across
the switches). ListGroups v5 shows the group's type at each step."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

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

LIST_GROUPS = 16
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


def test_classic_group_upgraded_and_downgraded_while_consuming(
    cluster: Skiff, tmp_path: Path
) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    everyone: list[Consumer] = []

    def start(name: str, protocol: str) -> Consumer:
        extra = CLASSIC_ARGS if protocol == "classic" else ()
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
