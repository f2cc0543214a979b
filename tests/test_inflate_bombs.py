"""Zip bombs of every codec against a real sidecar, on both storage formats: a records
section (or a legacy wrapper message's value) of a few hundred KB to a few MB that
inflates past protocol/inflate.MAX_INFLATED is CORRUPT_MESSAGE with a log line, stores
nothing, and the sidecar's memory stays bounded (VmHWM from /proc) and it goes on
answering."""

from __future__ import annotations

import functools
import struct
import zlib
from pathlib import Path

import cramjam
import pytest
import zstandard
from conftest import RedisServer, start_skiff, stop_process
from log_helpers import (
    LATEST,
    NONE,
    PRODUCE,
    create,
    list_offset,
    new_topic,
    produce,
    read_from,
)
from rawkafka import RawKafka, legacy_produce_body, read_legacy_produce_response
from test_batch_hostile import GOOD, forge, peak_rss_kib, varint

from sidecar.protocol.inflate import MAX_INFLATED

CORRUPT_MESSAGE = 2
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
MIB = 1 << 20
# Bigger than MAX_INFLATED, small enough to build quickly; snappy's best ratio is ~21:1
# (a 3-byte copy per 64 bytes), so its bombs are the largest on the wire.
INFLATED = {GZIP: 256 * MIB, LZ4: 256 * MIB, ZSTD: 1024 * MIB, SNAPPY: 120 * MIB}
TOPIC_CONFIG = {"max.message.bytes": str(16 * MIB)}  # the bombs pass the size check


def record_prefix(size: int) -> bytes:
    """One record (offset delta 0, null key, no headers) whose value is `size` zero
    bytes is this prefix and then size + 1 zero bytes (the last, a header count of 0)."""
    head = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(size)
    return varint(len(head) + size + 1) + head


def zeros_stream(compress: object, total: int) -> list[bytes]:
    chunk = bytes(MIB)
    out = [compress(chunk) for _ in range(total // MIB)]  # type: ignore[operator]
    return out + [compress(bytes(total % MIB))]  # type: ignore[operator]


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def snappy_block(prefix: bytes, total: int) -> bytes:
    """A raw snappy block inflating to `prefix` then zeros, `total` bytes in all: a
    literal (prefix and one zero), then copies of 64 bytes from 1 byte back."""
    literal = prefix + b"\x00"
    out = uvarint(total) + bytes([(len(literal) - 1) << 2]) + literal
    rest = total - len(literal)
    out += b"\xfe\x01\x00" * (rest // 64)  # copy, 2-byte offset: length 64, offset 1
    if rest % 64:
        out += bytes([((rest % 64) - 1) << 2 | 2]) + b"\x01\x00"
    return out


@functools.cache
def section(kind: str) -> tuple[int, bytes]:
    """(codec id, compressed bytes) of one record of INFLATED[codec] zero bytes."""
    if kind == "gzip":
        size = INFLATED[GZIP]
        z = zlib.compressobj(6, zlib.DEFLATED, 31)
        parts = [z.compress(record_prefix(size))] + zeros_stream(z.compress, size + 1)
        return GZIP, b"".join(parts + [z.flush()])
    if kind == "lz4":
        size = INFLATED[LZ4]
        c = cramjam.lz4.Compressor()
        c.compress(record_prefix(size))
        zeros_stream(c.compress, size + 1)
        return LZ4, bytes(c.finish())
    if kind.startswith("zstd"):
        size = INFLATED[ZSTD]
        prefix = record_prefix(size)
        declared = kind == "zstd-declared-size"
        compressor = zstandard.ZstdCompressor(level=1, write_content_size=declared)
        obj = compressor.compressobj(size=len(prefix) + size + 1 if declared else -1)
        parts = [obj.compress(prefix)] + zeros_stream(obj.compress, size + 1)
        data = b"".join(parts + [obj.flush()])
        assert zstandard.frame_content_size(data) == (len(prefix) + size + 1 if declared else -1)
        return ZSTD, data
    size = INFLATED[SNAPPY]
    prefix = record_prefix(size)
    if kind == "snappy-raw":
        return SNAPPY, snappy_block(prefix, len(prefix) + size + 1)
    # xerial framing (the Java client's): header, then 4 MiB blocks with their lengths
    blocks, left, first = [], len(prefix) + size + 1, prefix
    while left:
        n = min(left, 4 * MIB)
        blocks.append(snappy_block(first, n) if first else snappy_block(b"", n))
        first, left = b"", left - n
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    return SNAPPY, header + b"".join(struct.pack(">i", len(b)) + b for b in blocks)


KINDS = ["gzip", "snappy-raw", "snappy-xerial", "lz4", "zstd-declared-size", "zstd-no-size"]


def legacy_wrapper(codec: int, value: bytes) -> bytes:
    """A magic 1 message set of one compressed wrapper message holding `value`."""
    body = struct.pack(">bbq", 1, codec, 0) + struct.pack(">ii", -1, len(value)) + value
    return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body


def legacy_produce(kafka: RawKafka, topic: str, data: bytes) -> int:
    kafka.send(PRODUCE, 2, legacy_produce_body(topic, {0: data}))
    answer = read_legacy_produce_response(2, kafka.recv_raw())
    return answer["responses"][0]["partition_responses"][0]["error_code"]


@pytest.mark.parametrize("storage_format", ["batch", "record"])
def test_zip_bombs_are_corrupt_message_within_bounded_memory(
    own_redis: RedisServer, tmp_path: Path, storage_format: str
) -> None:
    bombs = {kind: section(kind) for kind in KINDS}  # built before the sidecar starts
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url)
    try:
        config = {**TOPIC_CONFIG, "skiff.storage.format": storage_format}
        with RawKafka("127.0.0.1", server.port, timeout=120) as kafka:
            warm = new_topic("warm")
            create(kafka, warm, config)
            assert produce(kafka, warm, forge(b"".join(GOOD), 3)).error_code == NONE
            before = peak_rss_kib(server.proc.pid) * 1024
            for kind, (codec, data) in bombs.items():
                for legacy in (False, True):
                    topic = new_topic(f"bomb-{kind}")
                    create(kafka, topic, config)
                    if legacy and codec != ZSTD:  # zstd has no legacy wrapper in Kafka
                        code = legacy_produce(kafka, topic, legacy_wrapper(codec, data))
                    elif legacy:
                        continue
                    else:
                        code = produce(kafka, topic, forge(data, 1, codec=codec)).error_code
                    assert code == CORRUPT_MESSAGE, (kind, legacy)
                    assert list_offset(kafka, topic, LATEST) == (0, -1), (kind, legacy)
                    assert own_redis.client().xlen(f"skiff:{{{topic}/0}}:log") == 0
            # still answering, and a good batch after the bombs is stored as ever
            topic = new_topic("after")
            create(kafka, topic, config)
            assert produce(kafka, topic, forge(b"".join(GOOD), 3)).error_code == NONE
            assert [r.value for r in read_from(kafka, topic, 0)] == [
                b"value-%d" % i for i in range(3)
            ]
        assert server.alive()
        # One decompression buffer of at most MAX_INFLATED at a time (and the request,
        # a few MB), never the gigabyte a bomb stands for.
        grew = peak_rss_kib(server.proc.pid) * 1024 - before
        assert grew < MAX_INFLATED + 64 * MIB, grew
        log = server.log()
        assert "inflate past" in log
        assert "Traceback" not in log
    finally:
        stop_process(server.proc)
