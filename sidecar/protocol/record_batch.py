"""Kafka v2 record batches: decoding produced batches into append-script arguments,
and encoding stored stream entries back into batches for Fetch.

Decoding uses aiokafka's Cython DefaultRecordBatch (CRC32C check, decompression
through cramjam, per-record parsing in C): ~0.7 us a record with the argument list
built, against ~2.6 us for a pure-Python parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import DefaultRecordBatch
from crc32c import crc32c

from .primitives import pack_i16, pack_i32, pack_i64, pack_u32, unpack_i32, uvarint, zigzag

BATCH_HEADER = 61  # bytes before the first record of a v2 batch
LOG_OVERHEAD = 12  # base offset (8) + batch length (4)
MAGIC_OFFSET = 16
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

FLAG_KEY_NULL = 1
FLAG_VALUE_NULL = 2


class InvalidBatch(Exception):
    """.code is the Kafka error name to answer with."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class DecodedBatch:
    count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    max_timestamp: int
    max_timestamp_delta: int
    records: list[bytes | int]  # flat: t, k, v, h, f per record


def split_batches(data: bytes | memoryview) -> list[memoryview]:
    """Split a produce request's records field into whole v2 batches."""
    view = memoryview(data)
    out = []
    pos = 0
    total = len(view)
    while pos < total:
        if total - pos < BATCH_HEADER:
            raise InvalidBatch("CORRUPT_MESSAGE", "truncated record batch header")
        (length,) = unpack_i32(view, pos + 8)
        end = pos + LOG_OVERHEAD + length
        if length < BATCH_HEADER - LOG_OVERHEAD or end > total:
            raise InvalidBatch("CORRUPT_MESSAGE", f"record batch length {length} out of bounds")
        magic = view[pos + MAGIC_OFFSET]
        if magic != 2:
            raise InvalidBatch(
                "UNSUPPORTED_FOR_MESSAGE_FORMAT", f"message format v{magic} is not supported"
            )
        out.append(view[pos:end])
        pos = end
    if not out:
        raise InvalidBatch("CORRUPT_MESSAGE", "no record batch in produce request")
    return out


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


def decode_batch(raw: memoryview) -> DecodedBatch:
    batch = DefaultRecordBatch(bytes(raw))
    if not batch.validate_crc():
        raise InvalidBatch("CORRUPT_MESSAGE", "record batch CRC32C mismatch")
    if batch.is_control_batch:
        raise InvalidBatch("INVALID_RECORD", "control batches cannot be produced")
    flat: list[bytes | int] = []
    max_ts = -1
    max_delta = 0
    count = 0
    try:
        for record in batch:
            key = record.key
            value = record.value
            ts = record.timestamp
            flags = (FLAG_KEY_NULL if key is None else 0) | (
                FLAG_VALUE_NULL if value is None else 0
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

_ZZ = [zigzag(i) for i in range(-1, 4096)]  # zigzag(i) == _ZZ[i + 1] for small i
_EMPTY_HEADERS = b"\x00"


def _zz(n: int) -> bytes:
    return _ZZ[n + 1] if -1 <= n < 4095 else zigzag(n)


def entry_offset(entry_id: bytes) -> int:
    return int(entry_id[2:]) - 1


def encode_entries(entries: list[Any], max_bytes: int) -> tuple[bytes, int]:
    """Encode stream entries as v2 batches (a new batch where the timestamp type
    changes). Stops before max_bytes, but always includes the first record.
    Returns (bytes, number of records encoded)."""
    out: list[bytes] = []
    size = 0
    taken = 0
    i = 0
    n = len(entries)
    while i < n:
        log_append = int(entries[i][1][9]) & 4
        base_offset = entry_offset(entries[i][0])
        base_ts = int(entries[i][1][1])
        max_ts = base_ts
        records: list[bytes] = []
        batch_size = BATCH_HEADER
        last_delta = 0
        while i < n:
            entry_id, f = entries[i]
            flags = int(f[9])
            if flags & 4 != log_append:
                break
            ts = int(f[1])
            delta = entry_offset(entry_id) - base_offset
            key = f[3]
            value = f[5]
            headers = f[7] or _EMPTY_HEADERS
            body = b"".join(
                (
                    b"\x00",
                    _zz(ts - base_ts),
                    _zz(delta),
                    b"\x01" if flags & FLAG_KEY_NULL else _zz(len(key)),
                    b"" if flags & FLAG_KEY_NULL else key,
                    b"\x01" if flags & FLAG_VALUE_NULL else _zz(len(value)),
                    b"" if flags & FLAG_VALUE_NULL else value,
                    headers,
                )
            )
            record = _zz(len(body)) + body
            if (taken or records) and size + batch_size + len(record) > max_bytes:
                n = i  # budget spent: close this batch and stop
                break
            records.append(record)
            batch_size += len(record)
            last_delta = delta
            if ts > max_ts:
                max_ts = ts
            i += 1
        if not records:
            break
        attributes = TIMESTAMP_TYPE_BIT if log_append else 0
        body = b"".join(records)
        tail = b"".join(
            (
                pack_i16(attributes),
                pack_i32(last_delta),
                pack_i64(base_ts),
                pack_i64(max_ts),
                pack_i64(-1),  # producer id
                pack_i16(-1),  # producer epoch
                pack_i32(-1),  # base sequence
                pack_i32(len(records)),
                body,
            )
        )
        out.append(pack_i64(base_offset))
        out.append(pack_i32(len(tail) + 9))  # + leader epoch (4), magic (1), crc (4)
        out.append(pack_i32(0))  # partition leader epoch
        out.append(b"\x02")
        out.append(pack_u32(crc32c(tail)))
        out.append(tail)
        size += batch_size
        taken += len(records)
    return b"".join(out), taken


__all__ = [
    "DecodedBatch",
    "InvalidBatch",
    "decode_batch",
    "encode_entries",
    "split_batches",
    "uvarint",
]
