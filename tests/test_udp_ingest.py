"""UDP ingest (--udp-listen/--udp-topic, sidecar/udp_ingest.py, docs/udp.md): datagrams over
loopback land as records, exactly once each when the sender stays below what Redis takes;
the framing carries keys and headers byte-exact; malformed and oversized datagrams are
counted and dropped; a flood while Redis is stalled drops datagrams (counted) instead of
growing the sidecar's memory."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from confluent_kafka import Consumer, TopicPartition
from conftest import ROOT, RedisServer, Skiff, start_skiff, stop_process
from kafka.partitioner.default import murmur2  # kafka-python's, to check Skiff's choice

from sidecar.udp_ingest import frame, parse

PARTITIONS = 3
STATS = re.compile(
    r"UDP ingest(?: stopped)?: received=(\d+) appended=(\d+) malformed=(\d+) oversized=(\d+) "
    r"dropped_overload=(\d+) failed=(\d+) batches=(\d+)"
)
FIELDS = ("received", "appended", "malformed", "oversized", "dropped_overload", "failed")


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Ingest:
    def __init__(self, server: Skiff, udp_port: int, topic: str, redis_url: str) -> None:
        self.server = server
        self.address = ("127.0.0.1", udp_port)
        self.topic = topic
        self.redis = redis.Redis.from_url(redis_url)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(self, data: bytes) -> None:
        self.sock.sendto(data, self.address)

    def stored(self) -> int:
        """Records stored: the last entry's ID is one past its last offset in either
        storage format (a `batch` topic keeps a batch per entry)."""
        total = 0
        for p in range(PARTITIONS):
            last = self.redis.xrevrange(f"skiff:{{{self.topic}/{p}}}:log", count=1)
            total += int(last[0][0].split(b"-")[1]) if last else 0
        return total

    def wait_stored(self, count: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.stored() < count:
            assert time.monotonic() < deadline, f"{self.stored()} of {count} records stored"
            time.sleep(0.002)

    def stats(self) -> dict[str, int]:
        """The last counters the sidecar logged."""
        found = STATS.findall(self.server.log())
        assert found, self.server.log()[-2000:]
        return dict(zip(FIELDS, map(int, found[-1][:6]), strict=True))

    def stop(self) -> dict[str, int]:
        stop_process(self.server.proc)
        self.sock.close()
        assert "UDP ingest stopped:" in self.server.log()
        return self.stats()


@pytest.fixture
def storage_format() -> str:
    """The sidecar's --storage-format; the tests that store records run on both."""
    return "record"


BOTH_FORMATS = pytest.mark.parametrize("storage_format", ["record", "batch"])


@pytest.fixture
def ingest(
    own_redis: RedisServer, tmp_path: Path, request: pytest.FixtureRequest, storage_format: str
) -> Iterator[Ingest]:
    topic = f"udp-{uuid.uuid4().hex[:8]}"
    udp_port = free_udp_port()
    extra = getattr(request, "param", ())
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        own_redis.url,
        "--num-partitions",
        str(PARTITIONS),
        "--udp-listen",
        f"127.0.0.1:{udp_port}",
        "--udp-topic",
        topic,
        "--udp-stats-interval-ms",
        "200",
        "--storage-format",
        storage_format,
        *extra,
    )
    deadline = time.monotonic() + 30
    while "UDP ingest on" not in server.log():
        assert server.alive() and time.monotonic() < deadline, server.log()
        time.sleep(0.05)
    it = Ingest(server, udp_port, topic, own_redis.url)
    yield it
    stop_process(server.proc)
    it.sock.close()


def consume_all(bootstrap: str, topic: str, count: int) -> list[object]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "udp-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[object] = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.5):
            assert msg.error() is None, msg.error()
            got.append(msg)
    consumer.close()
    assert len(got) == count
    return got


@BOTH_FORMATS
def test_ten_thousand_datagrams_land_exactly_once(ingest: Ingest, storage_format: str) -> None:
    total, chunk = 10_000, 100
    for start in range(0, total, chunk):
        for i in range(start, start + chunk):
            ingest.send(b"reading-%05d" % i)
        # Paced below what Redis takes: the next chunk waits until this one is stored,
        # so neither the kernel's socket buffer nor the sidecar's queue overflows.
        ingest.wait_stored(start + chunk)
    assert ingest.stored() == total
    entries = sum(
        int(ingest.redis.xlen(f"skiff:{{{ingest.topic}/{p}}}:log")) for p in range(PARTITIONS)
    )
    # record: an entry per datagram; batch: an entry per append of up to 100 datagrams
    assert entries == total if storage_format == "record" else entries < total
    messages = consume_all(ingest.server.bootstrap, ingest.topic, total)
    by_partition: dict[int, list[bytes]] = {}
    for m in messages:
        assert m.key() is None and m.headers() is None  # type: ignore[attr-defined]
        by_partition.setdefault(m.partition(), []).append(m.value())  # type: ignore[attr-defined]
    values = sorted(v for vs in by_partition.values() for v in vs)
    assert values == [b"reading-%05d" % i for i in range(total)]
    for vs in by_partition.values():  # each partition keeps arrival order
        assert vs == sorted(vs)
    # Round-robin without a key: the partitions differ by at most one batch's share.
    assert sorted(len(vs) for vs in by_partition.values())[0] > total // PARTITIONS // 2
    stats = ingest.stop()
    assert stats == {
        "received": total,
        "appended": total,
        "malformed": 0,
        "oversized": 0,
        "dropped_overload": 0,
        "failed": 0,
    }


@BOTH_FORMATS
@pytest.mark.parametrize("ingest", [("--message-max-bytes", "1000")], indirect=True)
def test_framing_keys_headers_and_bad_datagrams(ingest: Ingest) -> None:
    json_value = b'{"not": "framed", "temperature": 21.5}'
    binary = b"\xff\x01 binary value that starts like a frame"
    good = [  # (datagram, the record it must become: key, value, headers)
        (frame(b"plain value", key=b"sensor-1"), (b"sensor-1", b"plain value", [])),
        (
            frame(b"with headers", key=b"sensor-2", headers=[("unit", b"C"), ("seq", b"\0\1")]),
            (b"sensor-2", b"with headers", [("unit", b"C"), ("seq", b"\0\1")]),
        ),
        (frame(None, key=b"sensor-1"), (b"sensor-1", None, [])),  # a tombstone
        (
            frame(b"", headers=[("empty", b""), ("null", None)]),
            (None, b"", [("empty", b""), ("null", None)]),
        ),
        (frame(binary, key=b""), (b"", binary, [])),
        (json_value, (None, json_value, [])),  # not framed: the whole datagram is the value
        (b"", (None, b"", [])),  # an empty datagram: an empty value
        # A one-record batch of exactly max.message.bytes (61 + 2 + 930 + 7 bytes).
        (b"p" * 930, (None, b"p" * 930, [])),
    ]
    bad = [
        b"\xff",  # magic only
        b"\xff\x02\x00\x01\x00",  # unknown framing version
        b"\xff\x01\x80\x01\x00",  # unknown flag
        b"\xff\x01\x00\x14abc",  # key length 10, 3 bytes left
        b"\xff\x01\x00\x01\x02\x04\xff\xfe\x00",  # header key not UTF-8
        b"\xff\x01\x01\x01\x00value after the null-value flag",
    ]
    # The topic's max.message.bytes is 1000, counted as Kafka counts a producer's batch:
    # 931 bytes of value make a 1001-byte batch.
    oversized = [b"o" * 931, b"o" * 1001]
    for data in [d for d, _ in good[:3]] + bad + oversized + [d for d, _ in good[3:]]:
        ingest.send(data)
    ingest.wait_stored(len(good))
    messages = consume_all(ingest.server.bootstrap, ingest.topic, len(good))
    got = sorted(
        (
            (m.key(), m.value(), m.headers() or [])  # type: ignore[attr-defined]
            for m in messages
        ),
        key=repr,
    )
    assert got == sorted((record for _, record in good), key=repr)
    for m in messages:  # keyed records: the partition Kafka's default partitioner picks
        key = m.key()  # type: ignore[attr-defined]
        if key is not None:
            assert m.partition() == (murmur2(key) & 0x7FFFFFFF) % PARTITIONS  # type: ignore[attr-defined]
    stats = ingest.stop()
    assert stats == {
        "received": len(good) + len(bad) + len(oversized),
        "appended": len(good),
        "malformed": len(bad),
        "oversized": len(oversized),
        "dropped_overload": 0,
        "failed": 0,
    }


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_flood_while_redis_stalls_drops_instead_of_growing(
    ingest: Ingest, own_redis: RedisServer
) -> None:
    payload = b"f" * 1000
    for start in range(0, 3000, 100):  # warm up: the allocator and caches settle
        for _ in range(100):
            ingest.send(payload)
        ingest.wait_stored(start + 100)
    before = rss_kib(ingest.server.proc.pid)
    # Redis holds every write for 3 s (CLIENT PAUSE WRITE): no append can finish, and the
    # sender does not slow down (UDP has no back-pressure). An unbounded buffer would hold
    # everything sent.
    redis.Redis(port=own_redis.port).execute_command("CLIENT", "PAUSE", "3000", "WRITE")
    sent = 0
    end = time.monotonic() + 4
    while time.monotonic() < end:
        for _ in range(200):
            try:
                ingest.send(payload)
                sent += 1
            except BlockingIOError:  # pragma: no cover - loopback send buffer full
                pass
    peak = rss_kib(ingest.server.proc.pid)
    stats = ingest.stop()
    grown_mib = (peak - before) / 1024
    print(
        f"sent {sent} datagrams ({sent * 1000 / 2**20:.0f} MiB), "
        f"RSS grew {grown_mib:.1f} MiB: {stats}"
    )
    assert stats["dropped_overload"] > 0
    assert grown_mib < 64, f"RSS grew {grown_mib:.1f} MiB during the flood"
    # Every datagram read is accounted for: stored or counted as dropped.
    assert stats["received"] == stats["appended"] + stats["dropped_overload"]
    assert stats["malformed"] == stats["oversized"] == stats["failed"] == 0
    assert ingest.stored() == stats["appended"]


def test_documented_frame_bytes() -> None:
    """The by-hand example in docs/udp.md: key k1, header a=b, value v."""
    raw = bytes.fromhex("ff 01 00 04 6b 31 02 02 61 02 62 76")
    assert frame(b"v", key=b"k1", headers=[("a", b"b")]) == raw
    parsed = parse(raw, 123)
    assert (parsed.key, parsed.value, parsed.headers) == (b"k1", b"v", b"\x02\x02a\x02b")
    plain = parse(b"\xfe not framed", 123)  # only 0xFF starts a frame
    assert (plain.key, plain.value, plain.headers) == (None, b"\xfe not framed", b"")


def test_missing_topic_without_auto_creation_stops_start_up(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    log = tmp_path / "skiff.log"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sidecar.cli.main",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            own_redis.url,
            "--auto-create-topics",
            "false",
            "--udp-listen",
            f"127.0.0.1:{free_udp_port()}",
            "--udp-topic",
            "not-there",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    log.write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 1
    assert "--udp-topic 'not-there' does not exist and topic auto-creation is off" in proc.stderr
    lone = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve", "--udp-topic", "t"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert lone.returncode == 2 and "--udp-listen and --udp-topic go together" in lone.stderr


def test_illegal_topic_name_is_refused_before_start_up() -> None:
    """--udp-topic is checked by the flag's parser (sidecar/validation): one line, exit 2,
    before Redis or any socket is touched."""
    for name in ("bad/name", "my topic", "x" * 250):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "sidecar.cli.main",
                "serve",
                "--udp-listen",
                f"127.0.0.1:{free_udp_port()}",
                "--udp-topic",
                name,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2, proc.stderr
        assert "argument --udp-topic: Topic name is invalid" in proc.stderr
        assert "Traceback" not in proc.stderr
