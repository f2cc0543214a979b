"""Consumer groups end to end with real clients (confluent-kafka, the Java client,
kafka-python) as separate processes (tests/clients/group_member.py, ClientTool
group-consume): assignment, exactly-once consumption with commit-after-processing, a
member leaving and one crashing, static membership, cooperative-sticky rebalancing.

Against one Skiff sidecar on its own redis-server; SKIFF_GROUP_TESTS_AGAINST=kafka runs
the same tests against Apache Kafka 3.9.1 (tests/groups_harness.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from groups_harness import (
    SESSION_TIMEOUT_MS,
    Cluster,
    GroupRun,
    Member,
    committed_offsets,
    create_topic,
    high_watermarks,
    retry,
    start_cluster,
)

PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # Tests share the broker: each has its own topic and group.
    started = start_cluster(tmp_path_factory.mktemp("groups"))
    yield started
    started.stop()


@pytest.fixture
def run(cluster: Cluster, tmp_path: Path) -> Iterator[GroupRun]:
    suffix = uuid.uuid4().hex[:10]
    topic, group = f"gt-{suffix}", f"g-{suffix}"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    group_run = GroupRun(cluster.bootstrap, topic, group, PARTITIONS, tmp_path / "members", cluster)
    yield group_run
    group_run.kill_all()


def check_committed_at_end(run: GroupRun) -> None:
    """After the members stopped: the group's committed offsets are the high watermarks."""
    hw = high_watermarks(run.bootstrap, run.topic, run.partitions)
    fetched = retry(
        lambda: committed_offsets(run.bootstrap, run.group, run.topic, run.partitions),
        timeout=30,
        what="OffsetFetch",
    )
    committed = {p: offset for p, (offset, _metadata) in fetched.items()}
    assert committed == hw, f"committed offsets {committed} != high watermarks {hw}"


def assigned_events_since(members: list[Member], since: float) -> dict[str, list[object]]:
    return {
        m.name: [e.data["partitions"] for e in m.events("assigned", since=since)]
        for m in members
        if m.events("assigned", since=since)
    }


# -- three members, 30,000 records, exactly once ----------------------------------------------

GROUPS = {
    "confluent": ["confluent"] * 3,
    "java": ["java"] * 3,
    "kafka-python": ["kafka-python"] * 3,
    "mixed": ["confluent", "java", "kafka-python"],
}


@pytest.mark.parametrize("clients", list(GROUPS))
def test_three_members_consume_every_record_exactly_once(run: GroupRun, clients: str) -> None:
    members = [run.start(client) for client in GROUPS[clients]]
    run.wait_assignment(members, timeout=60)
    assigned_at = time.monotonic()

    produced = run.produce(30_000)
    run.wait_seen(produced, timeout=120)
    # No rebalance while consuming: an assignment changes only in one, and each change
    # prints an "assigned" line.
    changes = assigned_events_since(members, assigned_at)
    assert not changes, f"rebalanced while consuming: {changes}\n{run.describe()}"
    run.stop_all()

    run.check_exactly_once(produced)
    check_committed_at_end(run)


# -- a member leaves, one crashes ---------------------------------------------------------------


def test_leave_and_crash_lose_nothing(run: GroupRun) -> None:
    """Four members (confluent, Java, kafka-python, confluent). The Java member leaves
    (SIGTERM: close, LeaveGroup), then the first confluent member crashes mid-batch
    (SIGKILL: no LeaveGroup, its session expires). The others take its partitions over; every
    record is consumed, and only what a stopped member processed without committing is
    consumed twice."""
    victim = run.start("confluent", max_records=100, record_delay_ms=3)
    leaver = run.start("java")
    third = run.start("kafka-python")
    fourth = run.start("confluent")
    run.wait_assignment([victim, leaver, third, fourth], timeout=60)
    produced = run.produce(2000)
    run.wait_seen(produced)

    # Leave: the group rebalances at once, without waiting for a session timeout.
    code = leaver.terminate()
    assert code == 0 and leaver.events("closed"), f"{leaver.name} did not close cleanly"
    took_leave = run.wait_assignment([victim, third, fourth], timeout=30, stable_s=0.5)
    assert took_leave < SESSION_TIMEOUT_MS / 1000, (
        f"after a LeaveGroup the group took {took_leave:.1f}s to reassign (as long as a session "
        f"timeout: the leave was not acted on)\n{run.describe()}"
    )
    assert not leaver.uncommitted(), (
        f"{leaver.name} closed with uncommitted records {leaver.uncommitted()[:10]}"
    )
    produced |= run.produce(2000, start=2000)
    run.wait_seen(produced)

    # Crash in the middle of a batch: kill right after a record line, well before the
    # batch ends (up to 100 records at 3 ms each) and its commit.
    produced_more = run.produce(3000, start=4000)
    produced |= produced_more

    def mid_batch() -> str | None:
        events = victim.events()
        since_commit = 0
        for e in reversed(events):
            if e.kind != "record":
                break
            since_commit += 1
        if sum(1 for r in victim.records() if r in produced_more) < 100:
            return "it has not processed 100 records of the third round yet"
        return None if 0 < since_commit <= 50 else "not in the first half of a batch"

    run.wait_for(mid_batch, timeout=60, what=f"{victim.name} to be in the middle of a batch")
    victim.kill()
    window = victim.uncommitted()
    took_crash = run.wait_assignment([third, fourth], timeout=SESSION_TIMEOUT_MS / 1000 + 30)
    limit = SESSION_TIMEOUT_MS / 1000 + 8  # the session timeout, then one rebalance
    assert took_crash < limit, (
        f"the crashed member's partitions were reassigned {took_crash:.1f}s after the crash "
        f"(session timeout {SESSION_TIMEOUT_MS} ms; expected within {limit:.0f}s)\n{run.describe()}"
    )
    run.wait_seen(produced, timeout=60)
    run.stop_all()

    counts = run.check_at_least_once(produced)
    check_committed_at_end(run)
    print(
        f"reassigned {took_leave:.1f}s after the leave, {took_crash:.1f}s after the crash; "
        f"{len(window)} records in the crashed member's uncommitted window; {counts}"
    )


# -- static membership ---------------------------------------------------------------------------


def test_static_member_restart_keeps_its_partitions_without_rebalance(run: GroupRun) -> None:
    """Three static members (group.instance.id), one per client. Each in turn is stopped
    (a static member's close sends no LeaveGroup) and started again with the same instance
    id well within the session timeout: it gets the same partitions back and the other
    members see no rebalance."""
    session_ms = 15000  # room for a JVM to restart
    clients = ["confluent", "java", "kafka-python"]
    members = {
        client: run.start(client, instance_id=f"static-{client}", session_timeout_ms=session_ms)
        for client in clients
    }
    run.wait_assignment(list(members.values()), timeout=60)
    produced = run.produce(600)
    run.wait_seen(produced)

    for client in clients:
        old = members[client]
        before = old.assignment()
        stopped_at = time.monotonic()
        assert old.terminate() == 0 and old.events("closed"), f"{old.name} did not close"
        new = run.start(
            client,
            name=f"{client}-restarted",
            instance_id=f"static-{client}",
            session_timeout_ms=session_ms,
        )
        members[client] = new
        took = run.wait_for(
            lambda m=new: None if m.assignment() else "no (non-empty) assignment yet",
            timeout=session_ms / 1000,
            what=f"{new.name} to get its partitions back",
        )
        assert time.monotonic() - stopped_at < session_ms / 1000, "restart slower than a session"
        assert new.assignment() == before, (
            f"{new.name} got {sorted(new.assignment() or ())} after its restart, had "
            f"{sorted(before or ())}\n{run.describe()}"
        )
        time.sleep(2.5)  # a rebalance would show in the others' callbacks within a heartbeat
        others = [m for c, m in members.items() if c != client]
        moved = assigned_events_since(others, stopped_at)
        assert not moved, (
            f"restarting static member {client} rebalanced the others: {moved}\n{run.describe()}"
        )
        print(f"{client} restarted and reassigned in {took:.1f}s")

    produced |= run.produce(600, start=600)
    run.wait_seen(produced)
    run.stop_all()
    run.check_exactly_once(produced)
    check_committed_at_end(run)


# -- cooperative-sticky -----------------------------------------------------------------------


@pytest.mark.parametrize("client", ["java", "confluent", "kafka-python"])
def test_cooperative_sticky_third_member_joins(run: GroupRun, client: str) -> None:
    """Two members with the cooperative-sticky assignor, then a third joins. KIP-429's two
    rounds: the first revokes only the partitions that move (nobody is left empty, as an
    eager rebalance would leave them), the second gives them to the newcomer."""
    a = run.start(client, assignor="cooperative-sticky")
    b = run.start(client, assignor="cooperative-sticky")
    run.wait_assignment([a, b], timeout=60)
    produced = run.produce(600)
    run.wait_seen(produced)
    before = {m.name: m.assignment() or set() for m in (a, b)}

    joined_at = time.monotonic()
    c = run.start(client, assignor="cooperative-sticky")
    run.wait_assignment([a, b, c], timeout=60)

    for m in (a, b):
        final = m.assignment() or set()
        assert final <= before[m.name], (
            f"{m.name} gained partitions {sorted(final - before[m.name])} when a member joined"
        )
        assert final, f"{m.name} was left with nothing\n{run.describe()}"
        for e in m.events("assigned", since=joined_at):
            now = {p for _t, p in e.data["partitions"]}
            assert now >= final, (
                f"{m.name} let go of partitions it kept in the end: {e.data} (final "
                f"{sorted(final)}); a cooperative member revokes only what moves\n{run.describe()}"
            )
    # Two rounds: a partition reached the newcomer only after its old owner revoked it.
    for p in c.assignment() or set():
        owner = next(m for m in (a, b) if p in before[m.name])
        revoked = [
            e.t
            for e in owner.events("assigned", since=joined_at)
            if p not in {q for _t, q in e.data["partitions"]}
        ]
        gained = [e.t for e in c.events("assigned") if p in {q for _t, q in e.data["partitions"]}]
        assert revoked and gained and revoked[0] <= gained[0], (
            f"partition {p} went to {c.name} (at {gained[:1]}) before {owner.name} revoked "
            f"it (at {revoked[:1]})\n{run.describe()}"
        )

    produced |= run.produce(600, start=600)
    run.wait_seen(produced)
    run.stop_all()
    run.check_at_least_once(produced)
    check_committed_at_end(run)
