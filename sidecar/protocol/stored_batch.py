"""`batch` topics (config/storage_format.py): a produced v2 record batch is checked as
Kafka's broker checks it, then stored as one stream entry, its bytes as the producer
sent them, and served back from those bytes.

Entry: ID `0-<last offset + 1>`, one field `b` holding the batch. Its base offset is the
entry's last offset less the header's lastOffsetDelta, so XRANGE from `0-<o + 1>` starts
at the batch holding offset o, and nothing in the stored bytes depends on where the
batch landed: Fetch writes the base offset (and the partition leader epoch) into the
response, as Kafka's broker does when it assigns offsets in place.

Per-record work happens only where Kafka's broker does it too: `check` walks the records
once, in C (_record_walk.c, after decompressing the section), to validate offsets,
timestamps and, on compacted topics, keys; a topic whose compression.type names
another codec than the producer's is recompressed once, here, on append. Fetch copies
stored bytes. Readers that need records (down-conversion for Fetch v0-v3, ListOffsets by
timestamp, compaction, queues) expand batches with `record_entries`.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from crc32c import crc32c

from sidecar.config.topic import CODEC_IDS, timestamp_bounds
from sidecar.protocol import _record_walk  # type: ignore[attr-defined]
from sidecar.protocol.inflate import CODEC_NAMES, MAX_INFLATED, InflateError, inflate
from sidecar.protocol.record_batch import (
    ATTRIBUTES_AT,
    BATCH_HEADER,
    CODEC_SHIFT,
    CONTROL_BIT,
    CRC,
    CRC_AT,
    FLAG_KEY_NULL,
    FLAG_LOG_APPEND,
    FLAG_VALUE_NULL,
    LENGTH,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_BIT,
    InvalidBatch,
    compress_records,
    decode_headers,
    encode_headers,
)
from sidecar.validation import produce_limits

FIELD = b"b"
# base offset, length, partition leader epoch, magic, crc, attributes, last offset delta,
# first timestamp, max timestamp, producer id, producer epoch, base sequence, records.
HEADER = struct.Struct(">qiibIhiqqqhii")
assert HEADER.size == BATCH_HEADER
PREFIX = struct.Struct(">qii")  # what Fetch writes: base offset, length, leader epoch
LAST_DELTA = struct.Struct(">i")
LAST_DELTA_AT = 23
MAX_TS = struct.Struct(">q")
MAX_TS_AT = 35
FIRST_AND_MAX_TS = struct.Struct(">qq")
FIRST_TS_AT = 27
COUNT_AT = 57
CODEC_MASK = 0x07
# The partition leader epoch Fetch reports in batches: what the `record` path's builder
# writes, so both formats answer alike (Skiff's Metadata reports no leader epochs).
LEADER_EPOCH = 0


@dataclass(slots=True)
class CheckedBatch:
    """A validated batch and what the append script needs of it."""

    data: bytes  # what is stored: the producer's bytes, or recompressed / stamped
    offsets: int  # offsets it takes: lastOffsetDelta + 1 (= its record count)
    max_timestamp: int
    max_timestamp_delta: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    append_time: int  # LogAppendTime stamped into the batch, else -1
    records: tuple[()] = ()  # (telemetry reads a DecodedBatch's flat records; none here)
    trace_parents: tuple[bytes, ...] = ()  # records' traceparent headers (span links)

    @property
    def count(self) -> int:
        return self.offsets


def header(data: bytes | memoryview) -> tuple[Any, ...]:
    return HEADER.unpack_from(data, 0)


def check(
    view: memoryview,
    config: Mapping[str, Any],
    topic: str,
    partition: int,
    now_ms: int | None = None,
) -> CheckedBatch:
    """Validate one produced v2 batch (protocol/record_batch.single_batch found its
    bounds) as Kafka's LogValidator does for a client append; raise InvalidBatch with
    Kafka's error. Returns the bytes to store."""
    (
        base_offset,
        _length,
        _epoch,
        magic,
        crc,
        attributes,
        last_delta,
        _first_ts,
        _max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = HEADER.unpack_from(view, 0)
    if magic != 2:
        raise InvalidBatch("INVALID_RECORD", f"batch topics take message format v2, got v{magic}")
    if crc32c(view[ATTRIBUTES_AT:]) != crc:
        raise InvalidBatch("CORRUPT_MESSAGE", "record batch CRC32C mismatch")
    if attributes & CONTROL_BIT:
        raise InvalidBatch("INVALID_RECORD", "control batches cannot be produced")
    codec = attributes & CODEC_MASK
    if codec > 4:
        raise InvalidBatch("CORRUPT_MESSAGE", f"unknown compression codec id {codec}")
    if base_offset != 0:
        raise InvalidBatch(
            "INVALID_RECORD",
            f"The baseOffset of the record batch in the append to {topic}-{partition} should "
            f"be 0, but it is {base_offset}",
        )
    if count <= 0:
        raise InvalidBatch("INVALID_RECORD", "empty record batch")
    if last_delta + 1 != count:
        raise InvalidBatch(
            "INVALID_RECORD",
            f"Inconsistent batch offset range [0, {last_delta}] and count of records {count}",
        )
    if producer_id >= 0 and base_sequence < 0:
        raise InvalidBatch(
            "INVALID_RECORD",
            f"Invalid sequence number {base_sequence} in record batch with producerId "
            f"{producer_id}",
        )
    raw = inflated(view, codec) if codec else view
    compacted = "compact" in config["cleanup.policy"]
    log_append = config["message.timestamp.type"] == "LogAppendTime"
    now = int(time.time() * 1000) if now_ms is None else now_ms
    bounds = None if log_append else timestamp_bounds(config)
    max_ts, max_delta, keyless, parents = _walk(raw, count, compacted, bounds, now)
    if keyless:
        raise produce_limits.keyless_error(keyless, topic, partition)
    data: bytes | bytearray | memoryview = view
    target = config["compression.type"]
    if target != "producer" and CODEC_IDS[target] != codec:
        data = _compressed(bytearray(raw), CODEC_IDS[target], _level(config, target))
    append_time = -1
    if log_append:
        data = _stamp(data, now)
        append_time = max_ts = now
    return CheckedBatch(
        _as_bytes(data),
        count,
        max_ts,
        max_delta,
        producer_id,
        producer_epoch,
        base_sequence,
        append_time,
        trace_parents=parents,
    )


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    """`data` as bytes, without copying a view that spans a whole bytes object (a
    produced batch as the request decoder gave it: 100 KB copied per request)."""
    if isinstance(data, memoryview):
        whole = data.obj
        if isinstance(whole, bytes) and data.nbytes == len(whole) and data.contiguous:
            return whole
    return bytes(data)


def _walk(
    raw: bytes | bytearray | memoryview,
    count: int,
    compacted: bool,
    bounds: tuple[int, int] | None,
    now: int,
) -> tuple[int, int, list[int], tuple[bytes, ...]]:
    """The batch's max timestamp and its offset delta, on a compacted topic the indexes
    of records without a key, and the records' traceparent header values, checking that
    the records of `raw` (an uncompressed batch) parse, fill the batch exactly, run
    offset deltas 0, 1, 2, ... (Kafka refuses anything else from a client) and, with
    `bounds`, have timestamps within them. One pass in C (_record_walk.c); the
    timestamps are listed, in a second pass, only when one may be out of bounds."""
    first_ts, batch_max_ts = FIRST_AND_MAX_TS.unpack_from(raw, FIRST_TS_AT)
    log_append = bool(raw[ATTRIBUTES_AT + 1] & TIMESTAMP_TYPE_BIT)
    records = memoryview(raw)[BATCH_HEADER:]
    try:
        low, max_ts, max_delta, keyless, _, parents = _record_walk.walk(
            records, count, first_ts, batch_max_ts, log_append, compacted, False
        )
        if bounds is not None and (now - low > bounds[0] or max_ts - now > bounds[1]):
            stamps = _record_walk.walk(
                records, count, first_ts, batch_max_ts, log_append, False, True
            )[4]
            produce_limits.check_timestamps(stamps, bounds, now)
    except ValueError as exc:
        kind, message = exc.args
        raise InvalidBatch(kind, message) from None
    return max_ts, max_delta, keyless, tuple(parents)


def inflated(view: memoryview, codec: int, limit: int = MAX_INFLATED) -> bytearray:
    """The batch with its records section decompressed (codec bits cleared, CRC left as
    sent), refusing a section that would inflate past `limit` bytes (protocol/inflate)
    as CORRUPT_MESSAGE."""
    try:
        out = inflate(view[BATCH_HEADER:], codec, limit, head=view[:BATCH_HEADER])
    except InflateError as exc:
        raise InvalidBatch("CORRUPT_MESSAGE", str(exc)) from None
    out[ATTRIBUTES_AT + 1] &= ~CODEC_MASK & 0xFF
    return out


def _level(config: Mapping[str, Any], codec: str) -> int:
    return (
        int(config.get(f"compression.{codec}.level", 0)) if codec in ("gzip", "lz4", "zstd") else 0
    )


def recompress(view: memoryview, codec: int, target: int, level: int) -> bytearray:
    """The batch with its records section in codec `target` instead of `codec` (the
    topic's compression.type differs from the producer's): one decompression and one
    compression of the whole section, no per-record work. Producer fields kept."""
    return _compressed(inflated(view, codec) if codec else bytearray(view), target, level)


def _compressed(out: bytearray, target: int, level: int) -> bytearray:
    """An uncompressed batch with its records section compressed with `target`."""
    LENGTH.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    if target:
        out = compress_records(out, target, level)
    CRC.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return out


# -- reading --------------------------------------------------------------------------


def last_offset(entry_id: bytes) -> int:
    return int(entry_id[2:]) - 1


def base_offset(entry_id: bytes, data: bytes) -> int:
    return last_offset(entry_id) - LAST_DELTA.unpack_from(data, LAST_DELTA_AT)[0]


def record_count(data: bytes) -> int:
    return LAST_DELTA.unpack_from(data, COUNT_AT)[0]


def serve(
    entries: list[Any], max_bytes: int, first_always: bool = True
) -> tuple[list[Any], int, int]:
    """Fetch v4+: the stored batches of `entries` (a raw XRANGE reply) as they go on the
    wire, with their base offsets written in; whole batches within max_bytes, the first
    one whatever its size when first_always (as Kafka, a fetch from inside a batch gets
    the whole batch). Returns (chunks to join, records in them, bytes)."""
    chunks: list[Any] = []
    size = 0
    records = 0
    for entry_id, fields in entries:
        data = fields[1]
        if size + len(data) > max_bytes and (size or not first_always):
            break
        (delta,) = LAST_DELTA.unpack_from(data, LAST_DELTA_AT)
        chunks.append(
            PREFIX.pack(int(entry_id[2:]) - 1 - delta, len(data) - LOG_OVERHEAD, LEADER_EPOCH)
        )
        chunks.append(memoryview(data)[16:])
        size += len(data)
        records += LAST_DELTA.unpack_from(data, COUNT_AT)[0]
    return chunks, records, size


def placed(entry_id: bytes, data: bytes) -> bytes:
    """A stored batch with its base offset and leader epoch written in."""
    return (
        PREFIX.pack(base_offset(entry_id, data), len(data) - LOG_OVERHEAD, LEADER_EPOCH) + data[16:]
    )


def records(entry_id: bytes, data: bytes) -> DefaultRecordBatch:
    """The records of a stored batch, their offsets absolute."""
    return DefaultRecordBatch(placed(entry_id, data))


def rebuild(entry_id: bytes, data: bytes, kept: list[Any], config: Mapping[str, Any]) -> bytes:
    """A batch cleaned by compaction: only the records `kept` (from `records`), as
    Kafka's cleaner rebuilds a batch (MemoryRecords.filterTo): its base and last offset
    (lastOffsetDelta) stay, so the offsets between are gaps and the entry ID is
    unchanged; producer fields, transactional bit, codec and timestamp type stay. Stored
    with base offset 0, as every stored batch."""
    (_, _, _, _, _, attributes, last_delta, _, max_ts, pid, epoch, seq, _) = HEADER.unpack_from(
        data, 0
    )
    base = base_offset(entry_id, data)
    builder = DefaultRecordBatchBuilder(2, 0, attributes & 0x10, pid, epoch, seq, 2**31 - 1)
    for record in kept:
        builder.append(
            record.offset - base, record.timestamp, record.key, record.value, record.headers
        )
    out = bytearray(builder.build())
    LAST_DELTA.pack_into(out, LAST_DELTA_AT, last_delta)
    codec = attributes & CODEC_MASK
    if codec:
        out = compress_records(out, codec, _level(config, CODEC_NAMES[codec]))
    if attributes & TIMESTAMP_TYPE_BIT:
        out[ATTRIBUTES_AT + 1] |= TIMESTAMP_TYPE_BIT
        MAX_TS.pack_into(out, MAX_TS_AT, max_ts)
    CRC.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return bytes(out)


def first_timestamp(entry_id: bytes, data: bytes) -> int:
    """The timestamp of a stored batch's first record (LogAppendTime: the append time)."""
    for record in records(entry_id, data):
        return int(record.timestamp)
    return -1


def record_entries(entries: list[Any], start: int = 0) -> list[Any]:
    """Batch entries expanded into `record`-format entries (the shape of a raw XRANGE
    reply of a record topic: [b"0-<offset+1>", [b"t", ts, b"k", key, b"v", value, b"h",
    headers, b"f", flags]], values as bytes), records below `start` left out: for the
    readers that work record by record."""
    out: list[Any] = []
    for entry_id, fields in entries:
        data = fields[1]
        if last_offset(entry_id) < start or data[ATTRIBUTES_AT + 1] & CONTROL_BIT:
            continue  # transaction markers are no records to anyone reading records
        batch = DefaultRecordBatch(placed(entry_id, data))
        base_flags = (FLAG_LOG_APPEND if batch.timestamp_type else 0) | (
            (batch.compression_type & CODEC_MASK) << CODEC_SHIFT
        )
        for record in batch:
            offset = record.offset
            if offset < start:
                continue
            key = record.key
            value = record.value
            flags = (
                base_flags
                | (FLAG_KEY_NULL if key is None else 0)
                | (FLAG_VALUE_NULL if value is None else 0)
            )
            headers = record.headers
            out.append(
                [
                    b"0-%d" % (offset + 1),
                    [
                        b"t",
                        b"%d" % record.timestamp,
                        b"k",
                        key or b"",
                        b"v",
                        value or b"",
                        b"h",
                        encode_headers(headers) if headers else b"",
                        b"f",
                        b"%d" % flags,
                    ],
                ]
            )
    return out


def build(
    flat: list[Any],
    config: Mapping[str, Any],
    producer: tuple[int, int, int] = (-1, -1, -1),
    now_ms: int | None = None,
) -> CheckedBatch:
    """A batch to store for records given as the append script's flat arguments (t, k,
    v, h, f per record), for the ways in that carry no Kafka batch (legacy message
    sets, the HTTP API, UDP ingest, redrive): compressed with the topic's
    compression.type (none for `producer`), stamped for LogAppendTime. The caller
    validated the records."""
    pid, epoch, seq = producer
    builder = DefaultRecordBatchBuilder(2, 0, 0, pid, epoch, seq, 2**31 - 1)
    append = builder.append
    max_ts, max_delta = -1, 0
    count = len(flat) // 5
    for i in range(count):
        t, key, value, headers, flags = flat[5 * i : 5 * i + 5]
        flags = int(flags)
        ts = int(t)
        if ts > max_ts:
            max_ts, max_delta = ts, i
        append(
            i,
            ts,
            None if flags & FLAG_KEY_NULL else key,
            None if flags & FLAG_VALUE_NULL else value,
            decode_headers(headers) if headers else [],
        )
    data: bytearray | memoryview = memoryview(builder.build())
    target = config["compression.type"]
    if target not in ("producer", "uncompressed"):
        data = recompress(data, 0, CODEC_IDS[target], _level(config, target))
    append_time = -1
    if config["message.timestamp.type"] == "LogAppendTime":
        append_time = max_ts = int(time.time() * 1000) if now_ms is None else now_ms
        data = _stamp(data, append_time)
    return CheckedBatch(bytes(data), count, max_ts, max_delta, pid, epoch, seq, append_time)


ABORT, COMMIT = 0, 1  # control record types (Kafka's ControlRecordType)
TRANSACTIONAL_BIT = 0x10


def control_record(commit: bool) -> tuple[bytes, bytes]:
    """A transaction marker's record (EndTransactionMarker): key (version 0, type),
    value (version 0, coordinator epoch 0)."""
    return struct.pack(">hh", 0, COMMIT if commit else ABORT), struct.pack(">hi", 0, 0)


def control_batch(producer_id: int, producer_epoch: int, commit: bool, now_ms: int) -> bytes:
    """A transaction marker as Kafka's coordinator writes it: a transactional control
    batch of one record (control_record); stored with base offset 0 as every batch."""
    key, value = control_record(commit)
    builder = DefaultRecordBatchBuilder(2, 0, 1, producer_id, producer_epoch, -1, 2**31 - 1)
    builder.append(0, now_ms, key, value, [])
    out = bytearray(builder.build())
    out[ATTRIBUTES_AT + 1] |= CONTROL_BIT
    CRC.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return bytes(out)


def is_control(data: bytes) -> bool:
    return bool(data[ATTRIBUTES_AT + 1] & CONTROL_BIT)


PRODUCER_ID = struct.Struct(">q")
PRODUCER_ID_AT = 43


def transactional_producer(data: bytes) -> int | None:
    """The producer id of a transactional batch (a marker too), else None."""
    if not data[ATTRIBUTES_AT + 1] & TRANSACTIONAL_BIT:
        return None
    return int(PRODUCER_ID.unpack_from(data, PRODUCER_ID_AT)[0])


def in_aborted(entry_id: bytes, data: bytes, aborted: list[tuple[int, int, int]]) -> bool:
    """Whether the batch is a data batch of an aborted transaction: transactional, and
    its producer's (producer id, first offset, ABORT marker offset) range holds it."""
    if not data[ATTRIBUTES_AT + 1] & TRANSACTIONAL_BIT or is_control(data):
        return False
    pid = PRODUCER_ID.unpack_from(data, PRODUCER_ID_AT)[0]
    base = base_offset(entry_id, data)
    return any(p == pid and first <= base < marker for p, first, marker in aborted)


def _stamp(data: bytes | bytearray | memoryview, now: int) -> bytearray:
    """LogAppendTime: the timestamp type bit set, the max timestamp the append time."""
    out = bytearray(data)
    out[ATTRIBUTES_AT + 1] |= TIMESTAMP_TYPE_BIT
    MAX_TS.pack_into(out, MAX_TS_AT, now)
    CRC.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return out
