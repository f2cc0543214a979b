"""Kafka 4.x's Java consumer with `group.protocol=consumer` (KIP-848) against Skiff: the
broker assigns, members share partitions and hand them over on leave and after a
SIGKILL (session timeout), and committing consumers lose no record and see none twice.
The consumer is Kafka's own `VerifiableConsumer` (kafka-tools 4.2.0 from Maven
Central, tools/kafka_cli.py), which commits synchronously after each poll and reports
assignments, records and commits as JSON lines; `kafka-consumer-groups --describe`
of the same release lists the members."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import create, produce, wait_for
from rawkafka import RawKafka, build_batch

TOOLS_DIR = Path(__file__).resolve().parents[1] / "tools"
if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import kafka_cli  # noqa: E402  (tools/kafka_cli.py)
from kafka_jars import JarsUnavailable  # noqa: E402

KAFKA = "4.2.0"
PARTITIONS = 4
SESSION_MS = 4000
HEARTBEAT_MS = 500
DEADLINE_S = 90.0  # JVM start-up and group moves on a loaded 2-core machine


class Consumer:
    """One VerifiableConsumer JVM; its JSON events collected by a reader thread."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        log: Path,
        protocol: str = "consumer",
        extra: tuple[str, ...] = (),
    ) -> None:
        main_class = kafka_cli.tool_class("kafka-verifiable-consumer", KAFKA)
        args = [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--group-id",
            group,
            "--group-protocol",
            protocol,
            "--reset-policy",
            "earliest",
            "--verbose",
            *extra,
        ]
        try:
            cmd = kafka_cli.command(main_class, args, "ERROR", KAFKA)
        except JarsUnavailable as exc:
            pytest.skip(f"no Kafka {KAFKA} tools: {exc}")
        self.err = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL
        )
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)

    def _events(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def assigned(self) -> set[int]:
        """Partitions held now (the consumer protocol reports increments)."""
        held: set[int] = set()
        for e in self._events():
            parts = {p["partition"] for p in e.get("partitions", ())}
            if e["name"] == "partitions_assigned":
                held |= parts
            elif e["name"] in ("partitions_revoked", "partitions_lost"):
                held -= parts
        return held

    def records(self) -> list[tuple[int, int]]:
        return [(e["partition"], e["offset"]) for e in self._events() if e["name"] == "record_data"]

    def committed(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for e in self._events():
            if e["name"] == "offsets_committed" and e.get("success"):
                for o in e["offsets"]:
                    out[o["partition"]] = max(out.get(o["partition"], 0), o["offset"])
        return out

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(10)
        self.err.close()


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


def _produce_round(kafka: RawKafka, topic: str, n: int, tag: str) -> None:
    for p in range(PARTITIONS):
        batch = build_batch([f"{tag}-{p}-{i}".encode() for i in range(n)])
        assert produce(kafka, topic, batch, partition=p).error_code == 0


def _all_consumed(consumers: list[Consumer], per_partition: int) -> bool:
    """Every offset below per_partition read by someone and committed."""
    seen = {r for c in consumers for r in c.records()}
    want = {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}
    if not want <= seen:
        return False
    committed: dict[int, int] = {}
    for c in consumers:
        for p, o in c.committed().items():
            committed[p] = max(committed.get(p, 0), o)
    return all(committed.get(p) == per_partition for p in range(PARTITIONS))


def _exactly_once(consumers: list[Consumer], per_partition: int) -> None:
    counts = Counter(r for c in consumers for r in c.records())
    twice = sorted(r for r, n in counts.items() if n > 1)
    assert not twice, f"consumed twice: {twice[:10]}"
    assert set(counts) == {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}


def _split(a: Consumer, b: Consumer) -> bool:
    sa, sb = a.assigned(), b.assigned()
    return len(sa) == len(sb) == 2 and sa | sb == set(range(PARTITIONS))


def test_two_members_share_and_hand_over_on_leave(cluster: Skiff, tmp_path: Path) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with RawKafka("127.0.0.1", cluster.port) as kafka:
        create(kafka, topic, partitions=PARTITIONS)
        _produce_round(kafka, topic, 50, "a")
        first = Consumer(cluster.bootstrap, topic, group, tmp_path / "c1.log")
        second = None
        try:
            wait_for(lambda: _all_consumed([first], 50), DEADLINE_S, "the first member's reads")
            assert first.assigned() == set(range(PARTITIONS))
            second = Consumer(cluster.bootstrap, topic, group, tmp_path / "c2.log")
            wait_for(lambda: _split(first, second), DEADLINE_S, "a 2 + 2 split")
            _produce_round(kafka, topic, 50, "b")
            wait_for(lambda: _all_consumed([first, second], 100), DEADLINE_S, "round b")
            described = _describe_members(cluster.bootstrap, group)
            assert sorted(described) == [2, 2], described
            second.stop()  # close(): leaves the group (epoch -1)
            wait_for(
                lambda: first.assigned() == set(range(PARTITIONS)),
                DEADLINE_S,
                "the leaver's partitions",
            )
            _produce_round(kafka, topic, 50, "c")
            wait_for(lambda: _all_consumed([first, second], 150), DEADLINE_S, "round c")
            _exactly_once([first, second], 150)
        finally:
            first.stop()
            if second is not None:
                second.stop()


def test_sigkilled_member_partitions_move_after_the_session_timeout(
    cluster: Skiff, tmp_path: Path
) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with RawKafka("127.0.0.1", cluster.port) as kafka:
        create(kafka, topic, partitions=PARTITIONS)
        first = Consumer(cluster.bootstrap, topic, group, tmp_path / "c1.log")
        second = Consumer(cluster.bootstrap, topic, group, tmp_path / "c2.log")
        try:
            wait_for(lambda: _split(first, second), DEADLINE_S, "a 2 + 2 split")
            _produce_round(kafka, topic, 40, "a")
            wait_for(lambda: _all_consumed([first, second], 40), DEADLINE_S, "round a")
            killed_at = time.monotonic()
            second.stop(signal.SIGKILL)
            wait_for(
                lambda: first.assigned() == set(range(PARTITIONS)),
                DEADLINE_S,
                "the killed member's partitions",
            )
            moved_s = time.monotonic() - killed_at
            # Not before its session ended (less the heartbeat it may have just sent).
            assert moved_s >= (SESSION_MS - HEARTBEAT_MS) / 1000, moved_s
            print(f"partitions moved {moved_s:.2f} s after the SIGKILL (session {SESSION_MS} ms)")
            _produce_round(kafka, topic, 40, "b")
            wait_for(lambda: _all_consumed([first, second], 80), DEADLINE_S, "round b")
            _exactly_once([first, second], 80)
        finally:
            first.stop()
            second.stop()


def _describe_members(bootstrap: str, group: str) -> list[int]:
    """kafka-consumer-groups --describe --members: each member's #PARTITIONS."""
    main_class = kafka_cli.tool_class("kafka-consumer-groups", KAFKA)
    cmd = kafka_cli.command(
        main_class,
        ["--bootstrap-server", bootstrap, "--describe", "--group", group, "--members"],
        "ERROR",
        KAFKA,
    )
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    header = lines[0]
    assert header[:2] == ["GROUP", "CONSUMER-ID"], done.stdout
    column = header.index("#PARTITIONS")
    rows = [row for row in lines[1:] if row[0] == group]
    return [int(row[column]) for row in rows]


def test_librdkafka_members_share_and_hand_over(cluster: Skiff) -> None:
    """confluent-kafka (librdkafka >= 2.4 speaks group.protocol=consumer): the same
    sharing and hand-over, committing after each record."""
    from confluent_kafka import Consumer as RdConsumer

    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with RawKafka("127.0.0.1", cluster.port) as kafka:
        create(kafka, topic, partitions=PARTITIONS)
        _produce_round(kafka, topic, 30, "a")

    def member() -> Any:
        c = RdConsumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([topic])
        return c

    seen: list[tuple[int, int]] = []

    def poll(consumers: list[Any]) -> None:
        for c in consumers:
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                seen.append((msg.partition(), msg.offset()))
                c.commit(message=msg, asynchronous=False)

    def held(c: Any) -> set[int]:
        return {tp.partition for tp in c.assignment()}

    def until(consumers: list[Any], check: Any, what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            poll(consumers)

    first = member()
    second = None
    try:
        until([first], lambda: len(seen) == 30 * PARTITIONS, "round a")
        second = member()
        both = [first, second]
        until(
            both,
            lambda: (
                len(held(first)) == len(held(second)) == 2
                and held(first) | held(second) == set(range(PARTITIONS))
            ),
            "a 2 + 2 split",
        )
        with RawKafka("127.0.0.1", cluster.port) as kafka:
            _produce_round(kafka, topic, 30, "b")
        until(both, lambda: len(seen) >= 60 * PARTITIONS, "round b")
        second.close()  # leaves the group
        second = None
        until([first], lambda: held(first) == set(range(PARTITIONS)), "the leaver's partitions")
        with RawKafka("127.0.0.1", cluster.port) as kafka:
            _produce_round(kafka, topic, 30, "c")
        until([first], lambda: len(seen) >= 90 * PARTITIONS, "round c")
        counts = Counter(seen)
        assert not [r for r, n in counts.items() if n > 1]
        assert set(counts) == {(p, o) for p in range(PARTITIONS) for o in range(90)}
    finally:
        first.close()
        if second is not None:
            second.close()


def test_librdkafka_regex_subscription_gets_a_later_topic(cluster: Skiff) -> None:
    """confluent-kafka subscribing to "^prefix.*" with group.protocol=consumer sends
    the regex to the broker (KIP-848), which resolves it: a topic created after the
    member joined is assigned, and every record arrives exactly once."""
    from confluent_kafka import Consumer as RdConsumer

    prefix = f"rx{uuid.uuid4().hex[:8]}"
    first, later, group = f"{prefix}-a", f"{prefix}-b", f"g-{uuid.uuid4().hex[:8]}"
    with RawKafka("127.0.0.1", cluster.port) as kafka:
        create(kafka, first, partitions=2)
        create(kafka, f"x{prefix}", partitions=1)  # not matched: the regex is anchored
        for p in range(2):
            batch = build_batch([f"{first}-{p}-{i}".encode() for i in range(5)])
            assert produce(kafka, first, batch, partition=p).error_code == 0
    c = RdConsumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    seen: list[tuple[str, int, int, bytes]] = []

    def until(check: Any, what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                seen.append((msg.topic(), msg.partition(), msg.offset(), msg.value()))

    try:
        c.subscribe([f"^{prefix}.*"])
        until(lambda: len(seen) >= 10, f"the records of {first}")
        with RawKafka("127.0.0.1", cluster.port) as kafka:
            desc = kafka.request(
                69, 1, {"group_ids": [group], "include_authorized_operations": False}
            ).groups[0]
        # The broker, not the client, resolved it (librdkafka sends its regexes
        # each in parentheses, joined by "|").
        assert [m.subscribed_topic_regex for m in desc.members] == [f"(^{prefix}.*)"]
        with RawKafka("127.0.0.1", cluster.port) as kafka:
            create(kafka, later, partitions=3)
            for p in range(3):
                batch = build_batch([f"{later}-{p}-{i}".encode() for i in range(4)])
                assert produce(kafka, later, batch, partition=p).error_code == 0
        until(lambda: len(seen) >= 22, f"the records of {later}")
        want = [
            (t, p, i, f"{t}-{p}-{i}".encode())
            for t, parts, n in ((first, 2, 5), (later, 3, 4))
            for p in range(parts)
            for i in range(n)
        ]
        assert sorted(seen) == want
    finally:
        c.close()
