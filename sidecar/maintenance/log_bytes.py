"""The byte measure of retention.bytes, DescribeLogDirs sizes and compaction's
accounting: a batch counts what it takes in Kafka's v2 format uncompressed, as a
Kafka log of uncompressed batches holds it on disk (docs/architecture.md, "Byte
accounting"). Records are stored uncompressed in Redis, so the measure follows Redis
memory whatever codec the producer used."""

from __future__ import annotations

from collections.abc import Sequence

BATCH_HEADER = 61  # a v2 batch's header, log overhead included
ATTRIBUTES_LOW = 22  # the byte of a v2 batch holding the codec bits
# A v2 record beyond its key, value and header bytes: length, attributes, timestamp and
# offset deltas, key and value lengths as varints (and a header count of 0). An estimate:
# the deltas' varints depend on the batch.
RECORD_OVERHEAD = 9


def record_bytes(key: bytes, value: bytes, headers: bytes) -> int:
    return RECORD_OVERHEAD + len(key) + len(value) + len(headers)


def estimate(flat: Sequence[bytes | int]) -> int:
    """A batch's size from the append script's flat arguments (t, k, v, h, f per
    record): three C-level passes, no per-record Python loop."""
    count = len(flat) // 5
    payload = (
        sum(map(len, flat[1::5]))  # type: ignore[arg-type]
        + sum(map(len, flat[2::5]))  # type: ignore[arg-type]
        + sum(map(len, flat[3::5]))  # type: ignore[arg-type]
    )
    return BATCH_HEADER + RECORD_OVERHEAD * count + payload


def batch_bytes(raw: memoryview | None, flat: Sequence[bytes | int]) -> int:
    """An uncompressed v2 batch as sent is exactly the measure; a compressed one or a
    legacy message set (raw None) is estimated from its records."""
    if raw is not None and not raw[ATTRIBUTES_LOW] & 0x07:
        return len(raw)
    return estimate(flat)
