"""Hostile batches for `batch` topics (sidecar/protocol/stored_batch.check): each gets
Kafka's error code and stores nothing, and the sidecar stays up, answering, and bounded
in memory (a zstd bomb: a records section of a few KB that inflates to a GiB)."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
import zstandard
from conftest import RedisServer, Skiff, start_skiff, stop_process
from crc32c import crc32c
from log_helpers import LATEST, NONE, create, list_offset, new_topic, produce, read_from
from rawkafka import RawKafka, Rec, build_batch

from sidecar.protocol import stored_batch

BATCH = {"skiff.storage.format": "batch"}
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_RECORD = 87
HEADER = 61  # v2 batch header, up to and including the record count


def varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def record(offset_delta: int, value: bytes, key: bytes | None = b"k") -> bytes:
    body = b"\x00" + varint(0) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(len(value)) + value + varint(0)
    return varint(len(body)) + body


def forge(section: bytes, count: int, last_delta: int | None = None, codec: int = 0) -> bytes:
    """A v2 batch around a records section as given, its length and CRC right."""
    now = int(time.time() * 1000)
    last = count - 1 if last_delta is None else last_delta
    head = struct.pack(">hiqqqhii", codec, last, now, now, -1, -1, -1, count)
    crc = crc32c(head + section)
    return struct.pack(">qiibI", 0, 9 + len(head) + len(section), 0, 2, crc) + head + section


def resealed(batch: bytes, at: int, patch: bytes) -> bytes:
    """`batch` with bytes at `at` replaced and its CRC made to match again."""
    out = bytearray(batch)
    out[at : at + len(patch)] = patch
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


GOOD = [record(i, b"value-%d" % i) for i in range(3)]


def cases() -> dict[str, tuple[bytes, int]]:
    good = b"".join(GOOD)
    return {
        "truncated records section": (forge(good[:-5], 3), CORRUPT_MESSAGE),
        "record length beyond the batch": (
            forge(varint(10_000) + GOOD[0][1:] + GOOD[1] + GOOD[2], 3),
            CORRUPT_MESSAGE,
        ),
        "record length huge varint": (forge(b"\xff" * 10 + good, 3), CORRUPT_MESSAGE),
        "key length huge varint": (
            forge(varint(8) + b"\x00\x00\x00" + b"\xff" * 5 + b"\x01\x00" + good[10:], 3),
            CORRUPT_MESSAGE,
        ),
        "offset deltas 0, 2, 2": (
            forge(GOOD[0] + record(2, b"a") + record(2, b"b"), 3),
            INVALID_RECORD,
        ),
        "offset deltas 1, 2, 3": (
            forge(b"".join(record(i + 1, b"x") for i in range(3)), 3),
            INVALID_RECORD,
        ),
        "count above the records": (forge(good, 4), CORRUPT_MESSAGE),
        "count below the records": (forge(good, 2), CORRUPT_MESSAGE),
        "count and last offset delta disagree": (forge(good, 3, last_delta=5), INVALID_RECORD),
        "codec bits 5": (forge(good, 3, codec=5), CORRUPT_MESSAGE),
        "codec bits 7": (forge(good, 3, codec=7), CORRUPT_MESSAGE),
        "zstd section that is not zstd": (forge(good, 3, codec=4), CORRUPT_MESSAGE),
        "gzip section cut short": (
            resealed(build_batch([Rec(b"v" * 500)] * 3, compression=1)[:-8], 8, b""),
            CORRUPT_MESSAGE,
        ),
        "snappy section claiming 2 GB": (
            forge(
                b"\x82SNAPPY\x00" + bytes(8) + struct.pack(">i", 6) + b"\x80\x80\x80\x80\x08\x00",
                3,
                codec=2,
            ),
            CORRUPT_MESSAGE,
        ),
    }


def bomb(inflated: int) -> bytes:
    """A zstd batch of one record whose value is `inflated` zero bytes, compressed as a
    stream (never held whole here either): a few KB on the wire."""
    size = inflated
    body_head = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(size)
    compressor = zstandard.ZstdCompressor(level=1).compressobj()
    parts = [compressor.compress(varint(len(body_head) + size + 1) + body_head)]
    chunk = bytes(1 << 20)
    for _ in range(size >> 20):
        parts.append(compressor.compress(chunk))
    parts.append(compressor.compress(b"\x00"))  # no headers
    parts.append(compressor.flush())
    return forge(b"".join(parts), 1, codec=4)


@pytest.mark.parametrize("name", list(cases()))
def test_a_hostile_batch_gets_kafkas_error_and_stores_nothing(
    skiff: Skiff, redis_server: RedisServer, name: str
) -> None:
    batch, code = cases()[name]
    topic = new_topic("hostile")
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        create(kafka, topic, BATCH)
        assert produce(kafka, topic, batch).error_code == code
        assert redis_server.client().xlen(f"skiff:{{{topic}/0}}:log") == 0
        assert list_offset(kafka, topic, LATEST) == (0, -1)
        good = forge(b"".join(GOOD), 3)
        assert (produce(kafka, topic, good).error_code, list_offset(kafka, topic, LATEST)) == (
            NONE,
            (3, -1),
        )
        assert [r.value for r in read_from(kafka, topic, 0)] == [b"value-%d" % i for i in range(3)]


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_zstd_bomb_is_refused_within_bounded_memory(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    try:
        topic = new_topic("bomb")
        data = bomb(1 << 30)  # 1 GiB of zeros
        assert len(data) < 100_000
        with RawKafka("127.0.0.1", server.port, timeout=60) as kafka:
            create(kafka, topic, BATCH)
            assert produce(kafka, topic, data).error_code == CORRUPT_MESSAGE
            assert list_offset(kafka, topic, LATEST) == (0, -1)
            assert produce(kafka, topic, forge(b"".join(GOOD), 3)).error_code == NONE
        assert server.alive()
        # The sidecar held at most the bound (stored_batch.MAX_INFLATED) and itself.
        peak = peak_rss_kib(server.proc.pid) * 1024
        assert peak < stored_batch.MAX_INFLATED + 300 * 1024 * 1024, peak
        assert "Traceback" not in server.log()
    finally:
        stop_process(server.proc)
