"""Bounded decompression of what producers send: a v2 batch's records section or a
legacy wrapper message's value, for every codec Kafka has (gzip, snappy raw or in
xerial's framing, lz4 frames, zstd frames with or without a declared content size).

A few KB of zstd or gzip can stand for gigabytes. Kafka streams records out of a
compressed batch and so never holds them all; Skiff holds one batch's records at a
time, so every decompression of producer data goes through `inflate`, which never
writes past `limit` bytes: gzip, lz4 and zstd decompress into a buffer that grows by
doubling up to the limit (cramjam's *_into stops at the buffer's end), snappy blocks
are sized from the length each starts with before any is decompressed. A section that
would inflate further, or does not decompress, raises InflateError, which callers
answer as CORRUPT_MESSAGE (what Kafka answers for a batch it cannot read), storing
nothing.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import cramjam
import zstandard

# The most a records section may inflate to: the request limit (--max-request-bytes'
# default), so a batch's records in memory are never more than a request may be.
MAX_INFLATED = 100 * 1024 * 1024
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODEC_NAMES = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
# Kafka's gzip is gzip members, lz4 an LZ4 frame, zstd zstd frames (what aiokafka's
# codecs read, and Kafka's clients write).
_INTO = {
    GZIP: cramjam.gzip.decompress_into,
    LZ4: cramjam.lz4.decompress_into,
    ZSTD: cramjam.zstd.decompress_into,
}
_OUTGROWN = "failed to write whole buffer"  # cramjam's error when the buffer is too small
XERIAL = b"\x82SNAPPY\x00"
# xerial's stream header: magic, then version 1 and compatible version 1 (aiokafka
# reads only that; anything else is raw snappy, as there).
_XERIAL_V1 = XERIAL + struct.pack(">ii", 1, 1)
_I32 = struct.Struct(">i")


class InflateError(ValueError):
    """Producer data that does not decompress, or would inflate past the limit."""


def inflate(
    data: bytes | bytearray | memoryview,
    codec: int,
    limit: int = MAX_INFLATED,
    head: bytes | bytearray | memoryview = b"",
) -> bytearray:
    """`head`, then `data` decompressed with Kafka codec id `codec` (at most `limit`
    bytes of it; `head` saves the caller a copy of what it prepends); InflateError when
    it would be larger, does not decompress or the codec is unknown."""
    name = CODEC_NAMES.get(codec)
    if name is None:
        raise InflateError(f"unknown compression codec id {codec}")
    try:
        if codec == SNAPPY:
            return _snappy(memoryview(data), limit, head)
        size = _first_size(codec, data, limit)
        return _into(_INTO[codec], memoryview(data), size, limit, head)
    except InflateError:
        raise
    except Exception as exc:  # cramjam's errors and bad lengths come in several types
        raise InflateError(f"undecodable {name} data: {exc!r}") from None


def _too_large(limit: int) -> InflateError:
    return InflateError(f"compressed records inflate past {limit} bytes")


def _into(
    decompress_into: Callable[[memoryview, memoryview], int],
    data: memoryview,
    size: int,
    limit: int,
    head: bytes | bytearray | memoryview,
) -> bytearray:
    at = len(head)
    while True:
        out = bytearray(at + size)
        try:
            written = decompress_into(data, memoryview(out)[at:])
            break
        except cramjam.DecompressionError as exc:
            if _OUTGROWN not in str(exc):
                raise
            if size >= limit:
                raise _too_large(limit) from None
            del out  # before the next buffer: never two of them at once
            size = min(2 * size, limit)
    del out[at + written :]
    out[:at] = head
    return out


def _first_size(codec: int, data: bytes | bytearray | memoryview, limit: int) -> int:
    """A first buffer size: a zstd frame's declared content size when it has one (it
    only sizes the buffer: a frame that lies about it outgrows it, or not), else 16
    times the compressed size (a larger buffer costs page faults; a smaller one, a
    second pass)."""
    if codec == ZSTD:
        try:
            size = zstandard.frame_content_size(data)
        except zstandard.ZstdError:
            size = -1
        if size >= 0:
            return min(max(size, 1), limit)
    return min(max(1 << 16, 16 * len(data)), limit)


def _snappy(data: memoryview, limit: int, head: bytes | bytearray | memoryview) -> bytearray:
    """Raw snappy, or xerial's framing (a 16-byte header, then blocks each a big-endian
    int32 length and a raw snappy block: the Java client's format). A raw block starts
    with its decompressed length, so the total is known before anything is inflated."""
    if len(data) <= 16 or bytes(data[:16]) != _XERIAL_V1:
        if cramjam.snappy.decompress_raw_len(data) > limit:
            raise _too_large(limit)
        return bytearray(head) + cramjam.snappy.decompress_raw(data)
    blocks: list[memoryview] = []
    total, pos = 0, 16
    while pos < len(data):
        if pos + 4 > len(data):
            raise InflateError("xerial snappy block length cut short")
        (size,) = _I32.unpack_from(data, pos)
        if size < 0 or pos + 4 + size > len(data):
            raise InflateError(f"xerial snappy block of {size} bytes")
        block = data[pos + 4 : pos + 4 + size]
        total += cramjam.snappy.decompress_raw_len(block)
        if total > limit:
            raise _too_large(limit)
        blocks.append(block)
        pos += 4 + size
    out = bytearray(head)
    for block in blocks:
        out += cramjam.snappy.decompress_raw(block)
    return out
