"""A record batch's size as Kafka counts it for max.message.bytes (the v2 batch as sent,
uncompressed here: DefaultRecordBatch's 61-byte header, then each record as
DefaultRecord.sizeInBytes encodes it). For the ways in that carry no Kafka batch (the
HTTP API, UDP ingest), so their records meet the same limit a Kafka producer's would."""

from __future__ import annotations

from collections.abc import Iterable

from sidecar.protocol.record_batch import BATCH_HEADER


def _varint_size(value: int) -> int:
    """Bytes of a zigzag varint (Kafka's ByteUtils.sizeOfVarlong)."""
    raw = (value << 1) ^ (value >> 63)
    size = 1
    while raw >= 0x80:
        raw >>= 7
        size += 1
    return size


def _bytes_size(data: bytes | None) -> int:
    return 1 if data is None else _varint_size(len(data)) + len(data)


def batch_size(records: Iterable[tuple[int, bytes | None, bytes | None, bytes]]) -> int:
    """Bytes of one v2 batch holding `records`: (timestamp, key, value, headers in
    Kafka's encoding, b"" for none), the first timestamp the batch's base."""
    size = BATCH_HEADER
    base: int | None = None
    for offset_delta, (timestamp, key, value, headers) in enumerate(records):
        if base is None:
            base = timestamp
        body = (
            1  # attributes
            + _varint_size(timestamp - base)
            + _varint_size(offset_delta)
            + _bytes_size(key)
            + _bytes_size(value)
            + (len(headers) or 1)  # the header count alone when there are none
        )
        size += _varint_size(body) + body
    return size
