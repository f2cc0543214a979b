"""Several sidecars on one Redis: registration, Metadata and serving any partition.

Each test has a Redis of its own, so the session's sidecar is not listed."""

from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import RedisServer, Skiff, start_skiff, stop_process
from rawkafka import RawKafka, metadata_request

METADATA = 3
FAST = {"SKIFF_BROKER_SESSION_TIMEOUT_MS": "2000", "SKIFF_BROKER_HEARTBEAT_INTERVAL_MS": "300"}


def brokers(port: int) -> list[tuple[int, str, int]]:
    with RawKafka("127.0.0.1", port) as kafka:
        resp = kafka.request(METADATA, 12, metadata_request([]))
    return sorted((int(b.node_id), b.host, int(b.port)) for b in resp.brokers)


def wait_brokers(port: int, expected: list[tuple[int, str, int]], timeout: float = 10) -> float:
    """Seconds until Metadata from `port` lists exactly `expected`."""
    start = time.monotonic()
    while brokers(port) != expected:
        assert time.monotonic() - start < timeout, f"brokers {brokers(port)} != {expected}"
        time.sleep(0.1)
    return time.monotonic() - start


def start_two(redis: RedisServer, tmp_path: Path) -> tuple[Skiff, Skiff]:
    one = start_skiff(tmp_path / "one.log", "--redis-url", redis.url, env=FAST)
    two = start_skiff(tmp_path / "two.log", "--redis-url", redis.url, env=FAST)
    return one, two


def test_every_live_sidecar_is_a_broker_and_leads_some_partitions(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    one, two = start_two(own_redis, tmp_path)
    try:
        expected = [(0, "127.0.0.1", one.port), (1, "127.0.0.1", two.port)]
        wait_brokers(one.port, expected)
        wait_brokers(two.port, expected)
        topic = f"t-{uuid.uuid4().hex[:8]}"
        with RawKafka("127.0.0.1", one.port) as kafka:
            kafka.request(
                19,
                7,
                {
                    "topics": [{"name": topic, "num_partitions": 8, "replication_factor": 1}],
                    "timeout_ms": 5000,
                },
            )
        leaders = {}
        for port in (one.port, two.port):
            with RawKafka("127.0.0.1", port) as kafka:
                [t] = kafka.request(METADATA, 12, metadata_request([topic])).topics
            leaders[port] = {p.partition_index: p.leader_id for p in t.partitions}
            for p in t.partitions:
                assert list(p.replica_nodes) == list(p.isr_nodes) == [p.leader_id]
        # Both sidecars give the same answer, and both lead some of the 8 partitions.
        assert leaders[one.port] == leaders[two.port]
        assert set(leaders[one.port].values()) == {0, 1}
    finally:
        stop_process(one.proc)
        stop_process(two.proc)


def test_a_new_sidecar_is_in_every_sidecars_metadata_once_it_accepts_connections(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """No sidecar's Metadata lags another's: a client that one sidecar tells of a broker
    and the next does not drops that broker (librdkafka 2.10+ closes its connection and
    fails the requests in flight there, which left a consumer waiting for metadata for
    5 minutes). Heartbeats 10 s apart, so only Metadata itself can have caught up."""
    slow = {
        "SKIFF_BROKER_SESSION_TIMEOUT_MS": "30000",
        "SKIFF_BROKER_HEARTBEAT_INTERVAL_MS": "10000",
    }
    args = ("--redis-url", own_redis.url, "--num-partitions", "8")
    one = start_skiff(tmp_path / "one.log", *args, env=slow)
    two = start_skiff(tmp_path / "two.log", *args, env=slow)
    try:
        expected = [(0, "127.0.0.1", one.port), (1, "127.0.0.1", two.port)]
        assert brokers(one.port) == brokers(two.port) == expected
        topic = f"t-{uuid.uuid4().hex[:8]}"
        leaders = {}
        for port in (two.port, one.port):  # two creates it, one has not seen it yet
            with RawKafka("127.0.0.1", port) as kafka:
                [t] = kafka.request(METADATA, 12, metadata_request([topic])).topics
            leaders[port] = [p.leader_id for p in t.partitions]
        assert leaders[one.port] == leaders[two.port]
        assert set(leaders[one.port]) == {0, 1}
    finally:
        stop_process(one.proc)
        stop_process(two.proc)


def test_a_stopped_sidecar_leaves_at_once_and_a_killed_one_after_its_session(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    one, two = start_two(own_redis, tmp_path)
    three = start_skiff(tmp_path / "three.log", "--redis-url", own_redis.url, env=FAST)
    try:
        wait_brokers(
            one.port,
            [(0, "127.0.0.1", one.port), (1, "127.0.0.1", two.port), (2, "127.0.0.1", three.port)],
        )
        stop_process(two.proc)  # SIGTERM: a clean exit that deregisters
        assert two.proc.returncode == 0, two.log()
        # Gone from the registry at once, not after its session timeout.
        assert sorted(own_redis.client().hkeys("skiff:brokers")) == [b"0", b"2"]
        wait_brokers(one.port, [(0, "127.0.0.1", one.port), (2, "127.0.0.1", three.port)])
        stop_process(three.proc, signal.SIGKILL)  # no deregistration: the 2 s session expires
        took = wait_brokers(one.port, [(0, "127.0.0.1", one.port)])
        assert 0.5 < took < 5
        # A new sidecar takes the lowest free node id.
        four = start_skiff(tmp_path / "four.log", "--redis-url", own_redis.url, env=FAST)
        try:
            wait_brokers(one.port, [(0, "127.0.0.1", one.port), (1, "127.0.0.1", four.port)])
        finally:
            stop_process(four.proc)
    finally:
        for s in (one, two, three):
            stop_process(s.proc)


def test_a_node_id_held_by_a_live_sidecar_is_waited_for(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    # A session long enough that the second sidecar, however slowly it starts on a loaded
    # machine, finds the dead one's registration still live.
    session = {**FAST, "SKIFF_BROKER_SESSION_TIMEOUT_MS": "10000"}
    one = start_skiff(
        tmp_path / "one.log", "--redis-url", own_redis.url, "--node-id", "5", env=session
    )
    try:
        stop_process(one.proc, signal.SIGKILL)
        # Same id at once: the dead registration must expire first (no two live node 5s).
        started = time.monotonic()
        two = start_skiff(
            tmp_path / "two.log", "--redis-url", own_redis.url, "--node-id", "5", env=FAST
        )
        try:
            wait_brokers(two.port, [(5, "127.0.0.1", two.port)])
            assert "is registered by another live sidecar" in two.log()
            # It waited for the registration to expire (10 s), and not much longer.
            assert 9 < time.monotonic() - started < 40
        finally:
            stop_process(two.proc)
    finally:
        stop_process(one.proc)


def test_any_sidecar_serves_any_partition(own_redis: RedisServer, tmp_path: Path) -> None:
    one, two = start_two(own_redis, tmp_path)
    try:
        topic = f"t-{uuid.uuid4().hex[:8]}"
        # A producer that only knows sidecar one, a consumer that only knows sidecar two:
        # each follows Metadata to both, and every record arrives exactly once, in order.
        producer = Producer({"bootstrap.servers": one.bootstrap})
        for i in range(300):
            producer.produce(topic, value=b"%d" % i)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": two.bootstrap,
                "group.id": f"g-{topic}",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(300, 0.5) if not m.error()]
        consumer.close()
        assert got == [b"%d" % i for i in range(300)]
    finally:
        stop_process(one.proc)
        stop_process(two.proc)
