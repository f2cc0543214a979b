"""Kafka's listener settings: several named listeners per sidecar, each advertising its own
address in Metadata, FindCoordinator and DescribeCluster to the clients that came in on
it (across sidecars sharing one Redis); port 0; a SASL_PLAINTEXT listener's gate; and the
mistakes `skiff serve` refuses with one line."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from conftest import ROOT, RedisServer, Skiff, free_port, start_skiff, stop_process
from rawkafka import RawKafka

from sidecar.config import listeners as listener_config
from sidecar.config.listeners import ListenerError, parse_endpoints, parse_protocol_map
from sidecar.config.settings import Endpoint, HostPort, Settings

METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER, API_VERSIONS = 3, 10, 60, 18
TWO_LISTENERS = ("--listener-security-protocol-map", "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT")


def _wait_for(log: Path, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while (found := re.search(pattern, log.read_text(errors="replace"))) is None:
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.05)
    return found


def _start_two_listener_sidecar(tmp: Path, name: str, redis: RedisServer) -> tuple[Skiff, dict]:
    """A sidecar with INTERNAL on a fixed port and EXTERNAL on port 0, advertised as
    localhost (so the two listeners' addresses differ in host and port); returns it with
    what it should advertise: {listener: (host, port)} and its node id."""
    internal = free_port()
    log = tmp / f"{name}.log"
    skiff = start_skiff(
        log,
        "--redis-url",
        redis.url,
        "--listeners",
        f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:0",
        "--advertised-listeners",
        "EXTERNAL://localhost:0",
        *TWO_LISTENERS,
        "--inter-broker-listener-name",
        "INTERNAL",
        port=internal,
    )
    line = _wait_for(log, r"Skiff node (\d+) listening on (.*)")
    external = re.search(
        r"EXTERNAL://127\.0\.0\.1:(\d+) \(PLAINTEXT, advertised as localhost:(\d+)\)", line[2]
    )
    assert external is not None and external[1] == external[2] != "0", line[0]
    return skiff, {
        "node": int(line[1]),
        "INTERNAL": ("127.0.0.1", internal),
        "EXTERNAL": ("localhost", int(external[1])),
    }


def _seen(port: int, group: str) -> dict[str, object]:
    """What a client connected to `port` is told: Metadata's and DescribeCluster's brokers
    {node: (host, port)} and FindCoordinator's (node, host, port) for `group`."""
    with RawKafka("127.0.0.1", port) as kafka:
        meta = kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        cluster = kafka.request(
            DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False}
        )
        coordinator = kafka.request(
            FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]}
        )
    entry = coordinator.coordinators[0]
    return {
        "metadata": {int(b.node_id): (b.host, int(b.port)) for b in meta.brokers},
        "describe_cluster": {int(b.broker_id): (b.host, int(b.port)) for b in cluster.brokers},
        "coordinator": (int(entry.node_id), entry.host, int(entry.port)),
    }


def test_each_listener_advertises_its_own_addresses_across_sidecars(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    a, a_addr = _start_two_listener_sidecar(tmp_path, "a", own_redis)
    b, b_addr = _start_two_listener_sidecar(tmp_path, "b", own_redis)
    try:
        nodes = {a_addr["node"]: a_addr, b_addr["node"]: b_addr}
        assert len(nodes) == 2
        group = f"g-{uuid.uuid4().hex[:8]}"
        for listener in ("INTERNAL", "EXTERNAL"):
            want = {node: addr[listener] for node, addr in nodes.items()}
            for addr in (a_addr, b_addr):
                deadline = time.monotonic() + 30  # until each has seen the other register
                while True:
                    seen = _seen(addr[listener][1], group)
                    if seen["metadata"] == want or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                assert seen["metadata"] == want, (listener, seen)
                assert seen["describe_cluster"] == want, (listener, seen)
                node, host, port = seen["coordinator"]  # type: ignore[misc]
                assert (host, port) == nodes[node][listener], (listener, seen)
        # A real client bootstrapped on EXTERNAL follows the advertised localhost:port
        # addresses (and would fail on the INTERNAL ones if they were given to it).
        topic = f"t-{uuid.uuid4().hex[:8]}"
        bootstrap = f"localhost:{a_addr['EXTERNAL'][1]}"
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(10):
            producer.produce(topic, f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"}
        )
        try:
            consumer.subscribe([topic])
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < 10 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
            assert got == [f"v{i}".encode() for i in range(10)]
        finally:
            consumer.close()
    finally:
        stop_process(a.proc)
        stop_process(b.proc)


def test_sasl_plaintext_listener_serves_only_the_handshake_before_authentication(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    plain = free_port()
    log = tmp_path / "skiff.log"
    skiff = start_skiff(
        log,
        "--redis-url",
        own_redis.url,
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{plain},SECURE://127.0.0.1:0",
        "--listener-security-protocol-map",
        "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
        port=plain,
    )
    try:
        line = _wait_for(log, r"listening on .*SECURE://127\.0\.0\.1:(\d+) \(SASL_PLAINTEXT\)")
        secure = int(line[1])
        assert "no security configured" not in log.read_text()
        with RawKafka("127.0.0.1", secure) as kafka:
            versions = kafka.request(
                API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
            )
            assert versions.error_code == 0
            kafka.send(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
            assert kafka.closed()
        _wait_for(
            log,
            r"closing connection 127\.0\.0\.1:\d+: API key 3 before SASL "
            r"authentication on listener SECURE",
        )
        with RawKafka("127.0.0.1", plain) as kafka:  # the PLAINTEXT listener is open
            meta = kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
            assert [int(b.port) for b in meta.brokers] == [plain]
    finally:
        stop_process(skiff.proc)


def test_without_listener_settings_one_plaintext_listener_and_a_log_line(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    log = tmp_path / "skiff.log"
    skiff = start_skiff(log, "--redis-url", own_redis.url)
    try:
        _wait_for(log, rf"listening on PLAINTEXT://127\.0\.0\.1:{skiff.port}, Redis")
        _wait_for(log, r"no security configured")
        with RawKafka("127.0.0.1", skiff.port) as kafka:
            meta = kafka.request(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        assert [(b.host, int(b.port)) for b in meta.brokers] == [("127.0.0.1", skiff.port)]
    finally:
        stop_process(skiff.proc)


# -- parsing and resolution ----------------------------------------------------------------


def test_listener_settings_parse_as_kafka_writes_them() -> None:
    assert parse_endpoints("internal://:9092, EXTERNAL://[::1]:9093") == (
        Endpoint("INTERNAL", HostPort("0.0.0.0", 9092)),
        Endpoint("EXTERNAL", HostPort("::1", 9093)),
    )
    assert parse_protocol_map("a:ssl,B:SASL_PLAINTEXT") == (("A", "SSL"), ("B", "SASL_PLAINTEXT"))
    settings = Settings(
        listeners=parse_endpoints("PLAINTEXT://:9092,INTERNAL://10.0.0.1:9093"),
        advertised_listeners=parse_endpoints("PLAINTEXT://kafka.example:9092"),
        listener_security_protocol_map=parse_protocol_map(
            "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT"
        ),
        inter_broker_listener_name="internal",
    )
    got = listener_config.resolve(settings)
    assert [(li.name, li.protocol, str(li.bind), str(li.advertised)) for li in got] == [
        ("INTERNAL", "SASL_PLAINTEXT", "10.0.0.1:9093", "10.0.0.1:9093"),  # inter-broker first
        ("PLAINTEXT", "PLAINTEXT", "0.0.0.0:9092", "kafka.example:9092"),
    ]
    legacy = listener_config.resolve(
        Settings(listen=HostPort("0.0.0.0", 9), advertise=HostPort("h.example", 19))
    )
    assert [(li.name, li.protocol, str(li.bind), str(li.advertised)) for li in legacy] == [
        ("PLAINTEXT", "PLAINTEXT", "0.0.0.0:9", "h.example:19")
    ]


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"listeners": "EXT://:1"}, "listener EXT has no security protocol: add EXT:PLAINTEXT"),
        ({"listeners": "A://:1,B://:1", "map": "A:PLAINTEXT,B:PLAINTEXT"}, "both use port 1"),
        ({"listeners": "PLAINTEXT://:1", "advertised": "X://h:1"}, "has no listener of that"),
        ({"listeners": "PLAINTEXT://:1", "advertised": "PLAINTEXT://:1"}, "advertise a host"),
        ({"listeners": "PLAINTEXT://:1", "inter": "NOPE"}, "NOPE is not one of the listeners"),
    ],
)
def test_listener_mistakes(settings: dict[str, str], says: str) -> None:
    built = Settings(
        listeners=parse_endpoints(settings["listeners"]),
        advertised_listeners=parse_endpoints(settings.get("advertised", "")),
        listener_security_protocol_map=parse_protocol_map(
            settings.get("map", "PLAINTEXT:PLAINTEXT")
        ),
        inter_broker_listener_name=settings.get("inter"),
    )
    with pytest.raises(ListenerError, match=re.escape(says)):
        listener_config.resolve(built)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--listeners", "INTERNAL://127.0.0.1:0"], "listener INTERNAL has no security protocol"),
        (["--listeners", "127.0.0.1:9092"], "expected NAME://HOST:PORT"),
        (["--listener-security-protocol-map", "A:TLS"], "unknown security protocol 'TLS'"),
        (
            ["--listeners", "PLAINTEXT://127.0.0.1:0", "--advertise", "h:1"],
            "--advertised-listeners",
        ),
    ],
)
def test_serve_refuses_listener_mistakes_with_one_line(args: list[str], says: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert says in lines[0], lines[0]


def test_worker_i_serves_every_listener_on_its_port_plus_i() -> None:
    from sidecar.process.workers import worker_settings

    settings = Settings(
        listeners=parse_endpoints("INTERNAL://:9092,EXTERNAL://:9192"),
        advertised_listeners=parse_endpoints("EXTERNAL://kafka.example:9192"),
        listener_security_protocol_map=parse_protocol_map("INTERNAL:PLAINTEXT,EXTERNAL:SSL"),
    )
    worker = worker_settings(settings, 2, "redis://r:6379/0", private=False)
    got = listener_config.resolve(worker)
    assert [(li.name, li.bind.port, str(li.advertised)) for li in got] == [
        ("INTERNAL", 9094, "127.0.0.1:9094"),
        ("EXTERNAL", 9194, "kafka.example:9194"),
    ]
