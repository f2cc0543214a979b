"""Kafka v2 record batches: decoding produced batches into append-script arguments,
and encoding stored stream entries back into batches for Fetch, compressed with the
topic's compression.type (or each record's producer codec, kept in its flags).

Decoding uses aiokafka's Cython DefaultRecordBatch (CRC32C check, per-record parsing
in C; a compressed section is first inflated, bounded, by protocol/inflate): ~0.7 us
a record with the argument list built, against ~2.6 us for a pure-Python parser.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cramjam
from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from crc32c import crc32c

from sidecar.protocol.inflate import InflateError, inflate
from sidecar.protocol.primitives import read_uvarint, unpack_i32, zigzag

BATCH_HEADER = 61  # bytes before the first record of a v2 batch
LOG_OVERHEAD = 12  # base offset (8) + batch length (4)
MAGIC_OFFSET = 16
TIMESTAMP_TYPE_BIT = 0x08

FLAG_KEY_NULL = 1
FLAG_VALUE_NULL = 2
FLAG_LOG_APPEND = 4
# Flag bits 3-5: the codec the record's producer used (Kafka's attribute codec ids:
# 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd), for Fetch on compression.type=producer.
CODEC_SHIFT = 3
FLAG_CODEC_MASK = 0x38
CODEC_IDS = {"uncompressed": 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# Transactions on `record` topics (docs/transactions.md): a transactional record, and a
# transaction marker (its key and value are the control record's); both entries carry a
# sixth field, p = b"<producer id> <epoch>", that Fetch puts in the batch header.
FLAG_TRANSACTIONAL = 0x40
FLAG_CONTROL = 0x80
PRODUCER_FIELD = b"p"


class InvalidBatch(Exception):
    """.code is the Kafka error name to answer with; .record_errors the (index in the
    batch, message) of each bad record, for Produce v8+'s record_errors."""

    def __init__(
        self, code: str, message: str, record_errors: list[tuple[int, str]] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.record_errors = record_errors or []


@dataclass(slots=True)
class DecodedBatch:
    count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    max_timestamp: int
    max_timestamp_delta: int
    records: list[bytes | int]  # flat: t, k, v, h, f per record


def single_batch(data: bytes | memoryview) -> memoryview:
    """The one v2 batch of a partition's records in a Produce v3+ request. Like Kafka
    (ProduceRequest.validateRecords), anything but exactly one magic-2 batch is
    INVALID_RECORD; a batch whose length does not fit is CORRUPT_MESSAGE."""
    view = memoryview(data)
    total = len(view)
    if total == 0:
        raise InvalidBatch("INVALID_RECORD", "Produce v3+ needs exactly one record batch, got none")
    if total > MAGIC_OFFSET and view[MAGIC_OFFSET] != 2:
        raise InvalidBatch(
            "INVALID_RECORD",
            f"Produce v3+ only takes message format v2 batches, got v{view[MAGIC_OFFSET]}",
        )
    if total < BATCH_HEADER:
        raise InvalidBatch("CORRUPT_MESSAGE", "truncated record batch header")
    (length,) = unpack_i32(view, 8)
    end = LOG_OVERHEAD + length
    if length < BATCH_HEADER - LOG_OVERHEAD or end > total:
        raise InvalidBatch("CORRUPT_MESSAGE", f"record batch length {length} out of bounds")
    if end < total:
        if total - end < LOG_OVERHEAD:
            raise InvalidBatch("CORRUPT_MESSAGE", "trailing bytes after the record batch")
        raise InvalidBatch("INVALID_RECORD", "Produce v3+ takes exactly one record batch")
    return view


def encode_headers(headers: Any) -> bytes:
    """Headers in Kafka's record encoding (count, then key/value with varint lengths)."""
    if not headers:
        return b""
    parts = [zigzag(len(headers))]
    for key, value in headers:
        raw_key = key.encode() if isinstance(key, str) else key
        parts.append(zigzag(len(raw_key)))
        parts.append(raw_key)
        if value is None:
            parts.append(zigzag(-1))
        else:
            parts.append(zigzag(len(value)))
            parts.append(value)
    return b"".join(parts)


def decode_batch(raw: memoryview, log_append: bool = False) -> DecodedBatch:
    """Check and decode one batch into append-script arguments; log_append marks every
    record's flags for LogAppendTime (the script then stamps the append time)."""
    batch = DefaultRecordBatch(bytes(raw))
    if not batch.validate_crc():
        raise InvalidBatch("CORRUPT_MESSAGE", "record batch CRC32C mismatch")
    if batch.is_control_batch:
        raise InvalidBatch("INVALID_RECORD", "control batches cannot be produced")
    codec = batch.compression_type & 0x07
    base_flags = (
        (FLAG_LOG_APPEND if log_append else 0)
        | (codec << CODEC_SHIFT)
        | (FLAG_TRANSACTIONAL if batch.is_transactional else 0)
    )
    if codec:
        # Decompressed here, bounded (protocol/inflate), not by the reader, which would
        # inflate whatever the section stands for; the records are then read from the
        # uncompressed copy (codec bits cleared; its CRC was checked above).
        try:
            plain = inflate(raw[BATCH_HEADER:], codec, head=raw[:BATCH_HEADER])
        except InflateError as exc:
            raise InvalidBatch("CORRUPT_MESSAGE", str(exc)) from None
        plain[ATTRIBUTES_AT + 1] &= ~0x07 & 0xFF
        batch = DefaultRecordBatch(bytes(plain))
    flat: list[bytes | int] = []
    max_ts = -1
    max_delta = 0
    count = 0
    try:
        for record in batch:
            key = record.key
            value = record.value
            ts = record.timestamp
            flags = (
                (FLAG_KEY_NULL if key is None else 0)
                | (FLAG_VALUE_NULL if value is None else 0)
                | base_flags
            )
            headers = record.headers
            flat += (
                ts,
                key or b"",
                value or b"",
                encode_headers(headers) if headers else b"",
                flags,
            )
            if ts > max_ts:
                max_ts = ts
                max_delta = count
            count += 1
    except (CorruptRecordException, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise InvalidBatch("CORRUPT_MESSAGE", f"undecodable record: {exc}") from None
    except Exception as exc:  # decompression errors come in many types
        raise InvalidBatch("CORRUPT_MESSAGE", f"undecodable batch: {exc!r}") from None
    if count == 0:
        raise InvalidBatch("INVALID_RECORD", "empty record batch")
    return DecodedBatch(
        count=count,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        max_timestamp=max_ts,
        max_timestamp_delta=max_delta,
        records=flat,
    )


# -- encoding for Fetch ------------------------------------------------------------
# aiokafka's Cython DefaultRecordBatchBuilder writes records in C: 0.6 us a record
# against 2.3-2.9 us for a hand-written Python encoder (measured by bench/). The
# Python loop below only unpacks stream entries.

BASE_OFFSET = struct.Struct(">q")
ATTRIBUTES_AT = 21
CRC_AT = 17
CONTROL_BIT = 0x20  # in the attributes' low byte


def _field(fields: list[Any], at: int) -> bytes:
    return fields[at] if len(fields) > at else b""


def _producer(field: bytes) -> tuple[int, int]:
    """(producer id, epoch) from a transactional entry's p field; (-1, -1) if unreadable
    (an entry some other Redis client wrote)."""
    try:
        pid, epoch = field.split()
        return int(pid), int(epoch)
    except ValueError:
        return -1, -1


def record_in_aborted(offset: int, fields: list[Any], aborted: list[tuple[int, int, int]]) -> bool:
    """Whether a `record` topic's entry is a record of an aborted transaction: flagged
    transactional (not a marker), and its producer's (producer id, first offset, ABORT
    marker offset) range holds it (store.aborted_ranges)."""
    if int(fields[9]) & (FLAG_TRANSACTIONAL | FLAG_CONTROL) != FLAG_TRANSACTIONAL:
        return False
    pid = _producer(_field(fields, 11))[0]
    return any(p == pid and first <= offset < marker for p, first, marker in aborted)


def transactional_producer_of_entry(fields: list[Any]) -> int | None:
    """The producer id of a `record` topic's transactional entry (a marker too), else
    None."""
    if not int(fields[9]) & (FLAG_TRANSACTIONAL | FLAG_CONTROL):
        return None
    return _producer(_field(fields, 11))[0]


def is_control_entry(fields: list[Any]) -> bool:
    """Whether a `record` topic's entry is a transaction marker."""
    return bool(int(fields[9]) & FLAG_CONTROL)


def entry_offset(entry_id: bytes) -> int:
    return int(entry_id[2:]) - 1


def decode_headers(raw: bytes) -> list[tuple[str, bytes | None]]:
    """Inverse of encode_headers (stored header bytes back to pairs)."""
    count, pos = _read_zigzag(raw, 0)
    out = []
    for _ in range(count):
        klen, pos = _read_zigzag(raw, pos)
        key = raw[pos : pos + klen].decode()
        pos += klen
        vlen, pos = _read_zigzag(raw, pos)
        if vlen < 0:
            out.append((key, None))
        else:
            out.append((key, raw[pos : pos + vlen]))
            pos += vlen
    return out


def _read_zigzag(raw: bytes, pos: int) -> tuple[int, int]:
    value, pos = read_uvarint(raw, pos)
    return (value >> 1) ^ -(value & 1), pos


# -- compression for Fetch ----------------------------------------------------------------
# The builder writes uncompressed records; a compressed batch is its 61-byte header, then
# the records compressed by cramjam (C/Rust, once per batch: no per-record Python work),
# with the length, codec bits and CRC32C rewritten. Formats every Kafka client reads:
# gzip; snappy in xerial framing (Java's SnappyInputStream; librdkafka and kafka-python
# read it too); lz4 frames with independent blocks and no content checksum (Java rejects
# linked blocks); zstd frames.

LENGTH = struct.Struct(">i")
CRC = struct.Struct(">I")
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # as Java's SnappyOutputStream


def _gzip(data: memoryview, level: int) -> Any:
    return cramjam.gzip.compress(data, level=6 if level < 0 else level)


def _snappy(data: memoryview, level: int) -> Any:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK])
        out += LENGTH.pack(len(block))
        out += block
    return out


def _xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of a short input (under 16 bytes): the LZ4 frame header checksum."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    m = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    h = (seed + p5 + len(data)) & m
    pos = 0
    while pos + 4 <= len(data):
        h = rotl((h + int.from_bytes(data[pos : pos + 4], "little") * p3) & m, 17) * p4 & m
        pos += 4
    for byte in data[pos:]:
        h = rotl((h + byte * p5) & m, 11) * p1 & m
    h ^= h >> 15
    h = h * p2 & m
    h ^= h >> 13
    h = h * p3 & m
    return h ^ (h >> 16)


# LZ4 frame: FLG 0x60 (version 1, independent blocks, no block or content checksum),
# BD 0x40 (64 KiB blocks), then the descriptor's checksum byte.
_LZ4_DESCRIPTOR = b"\x60\x40"
_LZ4_HEADER = b"\x04\x22\x4d\x18" + _LZ4_DESCRIPTOR + bytes([_xxh32(_LZ4_DESCRIPTOR) >> 8 & 0xFF])
_LZ4_BLOCK = 64 * 1024
_LZ4_UNCOMPRESSED = 0x80000000
U32_LE = struct.Struct("<I")


def _lz4(data: memoryview, level: int) -> Any:
    # Levels as lz4's: below 3 the fast compressor, 3-12 high compression (Kafka allows
    # up to 17, which lz4 treats as 12).
    options: dict[str, Any] = (
        {"mode": "high_compression", "compression": min(level, 12)} if level >= 3 else {}
    )
    out = bytearray(_LZ4_HEADER)
    for start in range(0, len(data), _LZ4_BLOCK):
        chunk = data[start : start + _LZ4_BLOCK]
        block = cramjam.lz4.compress_block(chunk, store_size=False, **options)
        if len(block) < len(chunk):
            out += U32_LE.pack(len(block))
            out += block
        else:
            out += U32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED)
            out += chunk
    out += b"\x00\x00\x00\x00"  # end mark
    return out


def _zstd(data: memoryview, level: int) -> Any:
    return cramjam.zstd.compress(data, level=level)


_COMPRESSORS: dict[int, Callable[[memoryview, int], Any]] = {
    1: _gzip,
    2: _snappy,
    3: _lz4,
    4: _zstd,
}


@dataclass(frozen=True, slots=True)
class Compression:
    """How Fetch compresses batches: `codec` is a Kafka codec id (0 none, 1 gzip,
    2 snappy, 3 lz4, 4 zstd) or PRODUCER (-1: each record's producer codec, from its
    flags); levels as Kafka's compression.<codec>.level (gzip -1: zlib's default)."""

    codec: int
    gzip_level: int = -1
    lz4_level: int = 9
    zstd_level: int = 3

    def level(self, codec: int) -> int:
        return (0, self.gzip_level, 0, self.lz4_level, self.zstd_level)[codec]


PRODUCER = -1
UNCOMPRESSED = Compression(0)


def compress_records(raw: bytearray, codec: int, level: int) -> bytearray:
    """A built uncompressed batch (base offset set) rewritten with its records section
    compressed by `codec`; the caller sets the remaining attribute bits and the CRC."""
    out = raw[:BATCH_HEADER]
    out += _COMPRESSORS[codec](memoryview(raw)[BATCH_HEADER:], level)
    LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    out[ATTRIBUTES_AT + 1] |= codec
    return out


def _finish(
    builder: DefaultRecordBatchBuilder,
    base_offset: int,
    log_append: bool,
    codec: int = 0,
    level: int = 0,
    control: bool = False,
) -> bytearray:
    buf = builder.build()
    BASE_OFFSET.pack_into(buf, 0, base_offset)
    if codec:
        buf = compress_records(buf, codec, level)
    if log_append:
        # The builder only writes CreateTime batches: set the timestamp-type bit.
        buf[ATTRIBUTES_AT + 1] |= TIMESTAMP_TYPE_BIT
    if control:
        buf[ATTRIBUTES_AT + 1] |= CONTROL_BIT
    if codec or log_append or control:
        # The CRC32C covers everything from the attributes on.
        CRC.pack_into(buf, CRC_AT, crc32c(memoryview(buf)[ATTRIBUTES_AT:]))
    return buf


# Bytes a record takes in a batch beyond its key, value and headers, at most: length,
# attributes, timestamp and offset deltas, key and value lengths, header count (varints).
RECORD_OVERHEAD_MAX = 40


def compressed_margin(room: int) -> int:
    """Bytes kept free for what a codec adds to incompressible records (frame headers,
    block lengths, stored blocks: at most 0.1% plus 25 bytes measured on random data,
    gzip level 1 the largest), so a compressed batch stays within the limit its
    uncompressed records were sized for."""
    return 64 + (room >> 9)


def encode_entries(
    entries: list[Any], max_bytes: int, compression: Compression = UNCOMPRESSED
) -> tuple[bytes, int]:
    """Encode stream entries (raw XRANGE reply) as v2 batches starting at the first
    entry's offset: a new batch where the timestamp type changes, and for
    compression.type=producer where the producer's codec changes. Stops before
    max_bytes (the first record is always included). Returns (bytes, records)."""
    data, taken, _ = encode_entries_sized(entries, max_bytes, compression)
    return data, taken


def encode_entries_sized(
    entries: list[Any], max_bytes: int, compression: Compression = UNCOMPRESSED
) -> tuple[bytes, int, int]:
    """encode_entries, also returning the bytes the batches take uncompressed: what
    max_bytes limits (a compressed response is smaller than its limit), and what sizes
    the next read."""
    out: list[bytearray] = []
    raw_size = 0
    size = 0
    taken = 0
    n = len(entries)
    i = 0
    full = False
    by_producer = compression.codec == PRODUCER
    # Flag bits that must be equal within one batch.
    mask = (
        FLAG_LOG_APPEND
        | FLAG_TRANSACTIONAL
        | FLAG_CONTROL
        | (FLAG_CODEC_MASK if by_producer else 0)
    )
    while i < n and not full:
        first_fields = entries[i][1]
        group = int(first_fields[9]) & mask
        log_append = bool(group & FLAG_LOG_APPEND)
        # A transaction's records share their producer's batch (its id and epoch in the
        # header, as Kafka's clients match them against the aborted list); a marker is a
        # control batch of its own, uncompressed, as Kafka's coordinator writes it.
        transactional = group & (FLAG_TRANSACTIONAL | FLAG_CONTROL)
        control = bool(group & FLAG_CONTROL)
        producer = _field(first_fields, 11) if transactional else b""
        codec = (group & FLAG_CODEC_MASK) >> CODEC_SHIFT if by_producer else compression.codec
        if control:
            codec = 0
        base_offset = entry_offset(entries[i][0])
        # Offsets are contiguous (unless a plain Redis client deleted entries), so the
        # offset delta is the index and no per-record ID needs parsing.
        contiguous = entry_offset(entries[n - 1][0]) - base_offset == n - 1 - i
        room = max_bytes - size
        if codec:
            room -= compressed_margin(room)
        if taken:
            # A batch after the first: its first record must fit too (the builder always
            # takes a batch's first record).
            need = len(first_fields[3]) + len(first_fields[5]) + len(first_fields[7])
            if room < BATCH_HEADER + RECORD_OVERHEAD_MAX + need:
                break
        pid, epoch = _producer(producer) if transactional else (-1, -1)
        builder = DefaultRecordBatchBuilder(
            2, 0, 1 if transactional else 0, pid, epoch, -1, max(room, 1)
        )
        append = builder.append
        start = i
        # Fast path: a record whose flags equal the batch's first record's belongs to
        # the batch, with the same null key/value bits; no per-record int parsing.
        same = first_fields[9]
        same_bits = int(same)
        same_key_null = bool(same_bits & FLAG_KEY_NULL)
        same_value_null = bool(same_bits & FLAG_VALUE_NULL)
        # aiokafka's Cython builder reads a first timestamp of -1 (magic 0 records have
        # none) as "not set yet" and rebases those records on the next timestamp: end
        # such a batch before the first record that has one.
        no_first_ts = first_fields[1] == b"-1"
        while i < n:
            entry_id, f = entries[i]
            if no_first_ts and f[1] != b"-1":
                break
            flags = f[9]
            if flags == same:
                key = None if same_key_null else f[3]
                value = None if same_value_null else f[5]
            else:
                bits = int(flags)
                if bits & mask != group:
                    break
                key = None if bits & FLAG_KEY_NULL else f[3]
                value = None if bits & FLAG_VALUE_NULL else f[5]
            if transactional and (control and i > start or _field(f, 11) != producer):
                break
            headers = f[7]
            delta = i - start if contiguous else entry_offset(entry_id) - base_offset
            pairs = decode_headers(headers) if headers else []
            if append(delta, int(f[1]), key, value, pairs) is None:
                full = True
                break
            i += 1
        if i == start:
            break  # the budget is spent
        raw_size += builder.size()
        batch = _finish(builder, base_offset, log_append, codec, compression.level(codec), control)
        out.append(batch)
        size += len(batch)
        taken += i - start
    return b"".join(out), taken, raw_size
