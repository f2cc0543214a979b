"""Consumer groups across sidecars: the group coordinator's sidecar is killed mid-consumption
and the group carries on at the other one without losing a committed offset; committed
offsets and their metadata survive a restart of every sidecar.

Two Skiff sidecars share one redis-server (their own) and hold short broker sessions, so a
dead sidecar's registration and coordinator leases lapse in ~3 s. With
SKIFF_GROUP_TESTS_AGAINST=kafka: two Kafka 3.9.1 brokers and a controller, topics and
__consumer_offsets replicated on both (tests/groups_harness.py).
"""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from groups_harness import (
    FAILOVER_ENV,
    Cluster,
    GroupRun,
    committed_offsets,
    create_topic,
    find_coordinator,
    high_watermarks,
    retry,
    start_cluster,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's import-time noise
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka import TopicPartition as KpTopicPartition

PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Two sidecars (or brokers) of their own: these tests kill and restart them."""
    started = start_cluster(tmp_path / "cluster", nodes=2, env=FAILOVER_ENV)
    yield started
    started.stop()


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:10]
    return f"ft-{suffix}", f"fg-{suffix}"


class CommittedWatch(threading.Thread):
    """Samples the group's committed offsets (OffsetFetch) every 0.3 s until stopped, to
    check that none ever goes backwards. Samples that fail (coordinator moving) are skipped."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name="committed-watch", daemon=True)
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self.tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.samples: list[tuple[float, dict[int, int]]] = []
        self.failures = 0
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.is_set():
                try:
                    got = self.consumer.committed(self.tps, timeout=3)
                    self.samples.append((time.monotonic(), {tp.partition: tp.offset for tp in got}))
                except Exception:  # a failed sample while the coordinator moves: skipped
                    self.failures += 1
                self.done.wait(0.3)
        finally:
            self.consumer.close()

    def backwards(self) -> list[str]:
        best: dict[int, tuple[int, float]] = {}
        out = []
        for t, offsets in self.samples:
            for p, o in offsets.items():
                if o < 0:
                    continue  # nothing committed yet (OFFSET_INVALID)
                if p in best and o < best[p][0]:
                    out.append(
                        f"partition {p}: {best[p][0]} then {o} ({t - best[p][1]:.1f}s later)"
                    )
                if p not in best or o > best[p][0]:
                    best[p] = (o, t)
        return out


def produce_steadily(bootstrap: str, topic: str, count: int, seconds: float) -> dict[str, Any]:
    """Produce ``count`` records round-robin over the partitions, spread over ``seconds``,
    in a thread; the returned dict gets "offsets" (delivered) and "errors" when it ends."""
    result: dict[str, Any] = {"offsets": set(), "errors": []}

    def work() -> None:
        # Retries without a deadline short of the test's: a partition's leader may be the
        # killed broker until the survivor takes over.
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "acks": "all",
                "message.timeout.ms": 120000,
            }
        )

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                result["errors"].append(str(err))
            else:
                result["offsets"].add((msg.partition(), msg.offset()))

        started = time.monotonic()
        for i in range(count):
            producer.produce(
                topic, value=str(i).encode(), partition=i % PARTITIONS, on_delivery=report
            )
            if i % 100 == 0:
                producer.poll(0)
                ahead = started + seconds * i / count - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        result["undelivered"] = producer.flush(150)

    thread = threading.Thread(target=work, name="producer", daemon=True)
    thread.start()
    result["thread"] = thread
    return result


def test_coordinator_failover_mid_consumption(cluster: Cluster, tmp_path: Path) -> None:
    """Three members (confluent, Java, kafka-python) consume 12,000 records produced over
    8 s; once a quarter is consumed, the coordinator's sidecar is SIGKILLed. FindCoordinator
    then names the other sidecar, which returns every commit acknowledged before the kill;
    all records are consumed, the committed offsets end at the high watermarks and never
    went backwards."""
    topic, group = names()
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    run = GroupRun(cluster.bootstrap, topic, group, PARTITIONS, tmp_path / "members", cluster)
    watch = CommittedWatch(cluster.bootstrap, group, topic)
    killed_at = float("inf")
    try:
        members = [run.start(c, max_records=100) for c in ("confluent", "java", "kafka-python")]
        run.wait_assignment(members, timeout=60)
        coordinator, port = retry(
            lambda: find_coordinator(next(iter(cluster.nodes.values())), group),
            timeout=20,
            what="FindCoordinator",
        )
        assert cluster.nodes.get(coordinator) == port, (
            f"FindCoordinator named node {coordinator} on port {port}; nodes {cluster.nodes}"
        )
        survivor = next(n for n in cluster.nodes if n != coordinator)
        watch.start()

        total = 12_000
        producing = produce_steadily(cluster.bootstrap, topic, total, seconds=8)
        run.wait_for(
            lambda: None if len(run.seen()) >= total // 4 else f"{len(run.seen())} seen",
            timeout=60,
            what=f"a quarter of {total} records consumed",
        )
        cluster.kill(coordinator)
        killed_at = time.monotonic()
        acked_before = {}
        for m in members:
            for p, o in m.acked_commits(before=killed_at).items():
                acked_before[p] = max(acked_before.get(p, -1), o)

        # The group moves to the survivor.
        def moved() -> tuple[int, int]:
            node, _port = find_coordinator(cluster.nodes[survivor], group)
            if node != survivor:
                raise RuntimeError(f"coordinator is still node {node}")
            return node, _port

        retry(moved, timeout=30, what=f"FindCoordinator to name the survivor (node {survivor})")
        moved_after = time.monotonic() - killed_at

        # No acknowledged commit is lost: what the survivor returns is at least that.
        after = retry(
            lambda: committed_offsets(cluster.bootstrap, group, topic, PARTITIONS),
            timeout=30,
            what="OffsetFetch after the failover",
        )
        lost = {p: (acked, after[p][0]) for p, acked in acked_before.items() if after[p][0] < acked}
        assert not lost, (
            f"commits acknowledged before the coordinator died are gone after the failover: "
            f"partition: (acknowledged, now committed) {lost}\n{run.describe()}"
        )

        producing["thread"].join(timeout=180)
        assert not producing["errors"] and producing.get("undelivered") == 0, (
            f"producer: {producing.get('undelivered')} undelivered, errors "
            f"{producing['errors'][:5]}"
        )
        produced = producing["offsets"]
        assert len(produced) == total
        run.wait_seen(produced, timeout=90)
        hw = high_watermarks(cluster.bootstrap, topic, PARTITIONS)

        def all_committed() -> str | None:
            try:
                now = committed_offsets(cluster.bootstrap, group, topic, PARTITIONS)
            except Exception as exc:  # retried until the deadline
                return repr(exc)
            offsets = {p: o for p, (o, _m) in now.items()}
            return None if offsets == hw else f"committed {offsets}, high watermarks {hw}"

        run.wait_for(all_committed, timeout=30, what="committed offsets to reach the end")
        run.stop_all()
        counts = run.check_at_least_once(produced)
    finally:
        watch.done.set()
        run.kill_all()
    watch.join(timeout=10)
    backwards = watch.backwards()
    assert not backwards, f"committed offsets went backwards: {backwards}"
    times = [t for t, _offsets in watch.samples]
    assert any(t < killed_at for t in times) and any(t > killed_at for t in times), (
        f"the watch needs OffsetFetch samples before and after the kill: {len(times)} samples"
    )
    rebalanced = sum(len(m.events("assigned", since=killed_at)) for m in members)
    print(
        f"coordinator node {coordinator} killed; FindCoordinator named node {survivor} "
        f"{moved_after:.1f}s later; {len(watch.samples)} OffsetFetch samples, "
        f"{watch.failures} failed; {rebalanced} assignment changes after the kill; {counts}"
    )


# -- committed offsets and metadata across a restart ----------------------------------------


METADATA = {
    0: "",  # empty metadata
    1: "confluent: plain",
    2: "unicode ✓ ü 🚀",
    3: "x" * 1000,  # well under offset.metadata.max.bytes (4096)
}


def test_committed_offsets_and_metadata_survive_restart(cluster: Cluster, tmp_path: Path) -> None:
    """Offsets committed with metadata by confluent-kafka (TopicPartition.metadata) and by
    kafka-python (OffsetAndMetadata), and by a group member, read back with the exact
    offset and metadata after every sidecar was restarted."""
    topic, group = names()
    kp_group, member_group = f"{group}-kp", f"{group}-member"
    create_topic(cluster.bootstrap, topic, PARTITIONS)
    run = GroupRun(cluster.bootstrap, topic, member_group, PARTITIONS, tmp_path / "m", cluster)
    produced = run.produce(300)

    # confluent: a consumer that never subscribes commits for the group (generation -1).
    confluent_commits = {p: (10 * p + 3, meta) for p, meta in METADATA.items()}
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        result = consumer.commit(
            offsets=[
                TopicPartition(topic, p, offset, metadata=meta)
                for p, (offset, meta) in confluent_commits.items()
            ],
            asynchronous=False,
        )
        assert all(tp.error is None for tp in result or []), result
    finally:
        consumer.close()

    # kafka-python, another group.
    kp_commits = {p: (5 * p + 1, f"kafka-python {p} ü") for p in range(PARTITIONS)}
    kp = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap.split(","),
        group_id=kp_group,
        enable_auto_commit=False,
    )
    try:
        kp.commit(
            {
                KpTopicPartition(topic, p): OffsetAndMetadata(offset, meta, -1)
                for p, (offset, meta) in kp_commits.items()
            }
        )
    finally:
        kp.close(autocommit=False)

    # A member of a real group consumes everything and commits as it goes.
    run.start("confluent")
    run.wait_seen(produced)
    run.stop_all()
    hw = high_watermarks(cluster.bootstrap, topic, PARTITIONS)

    def read_back() -> dict[str, dict[int, tuple[int, str | None]]]:
        return {
            "confluent": committed_offsets(cluster.bootstrap, group, topic, PARTITIONS),
            "kafka-python": committed_offsets(cluster.bootstrap, kp_group, topic, PARTITIONS),
            "member": committed_offsets(cluster.bootstrap, member_group, topic, PARTITIONS),
        }

    def check(got: dict[str, dict[int, tuple[int, str | None]]]) -> None:
        for p, (offset, meta) in confluent_commits.items():
            # confluent-kafka (2.16) sends metadata with its C string's NUL terminator
            assert got["confluent"][p][0] == offset and got["confluent"][p][1] in (
                meta,
                meta + "\0",
            ), f"confluent commit of partition {p}: {got['confluent'][p]}, want {offset} {meta!r}"
        unset = {p: v for p, v in got["confluent"].items() if p not in confluent_commits}
        assert all(o == -1 for o, _m in unset.values()), f"never committed, yet: {unset}"
        assert got["kafka-python"] == kp_commits, "kafka-python's commits read back differently"
        assert {p: o for p, (o, _m) in got["member"].items()} == hw, "the member's commits"

    before = read_back()
    check(before)

    cluster.restart()
    after = retry(read_back, timeout=60, what="OffsetFetch after the restart")
    assert after == before, f"committed offsets changed across the restart:\n{before}\n{after}"

    # Each client reads its own commits back too (its OffsetFetch, its metadata decoding).
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        tps = [TopicPartition(topic, p) for p in confluent_commits]
        got_confluent = consumer.committed(tps, timeout=30)
    finally:
        consumer.close()
    assert {tp.partition: (tp.offset, tp.metadata or "") for tp in got_confluent} == (
        confluent_commits
    )
    kp = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap.split(","),
        group_id=kp_group,
        enable_auto_commit=False,
    )
    try:
        for p, (offset, meta) in kp_commits.items():
            got = kp.committed(KpTopicPartition(topic, p), metadata=True)
            assert (got.offset, got.metadata) == (offset, meta), f"partition {p}: {got}"
    finally:
        kp.close(autocommit=False)
