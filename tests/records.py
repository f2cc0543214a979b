"""A deterministic record set for round-trip tests, and a byte-exact comparison.

``make_records(n, seed)`` gives records in the adapters' input form (tests/clients/*):

    {"partition": None, "key": bytes | None, "value": bytes | None,
     "headers": [(str, bytes | None), ...], "timestamp": int}

The first records are fixed special cases (so even a short list covers them), the rest
are drawn from ``random.Random(seed)``. Covered: keys, null keys, empty keys, null and
empty values, binary values (every byte value 0..255 appears), no headers, several
headers, duplicate header names, binary, empty and null header values, a non-ASCII
header name, and explicit timestamps that mostly increase but are sometimes equal and
now and then go backwards (see ``backward_steps``).

``assert_same(produced, consumed, first_offset)`` checks every field byte for byte and
that offsets run first_offset, first_offset + 1, ... with no gap, and fails with a
readable description of the first mismatch.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

BASE_TIMESTAMP = 1_700_000_000_000  # 2023-11-14, ms
ALL_BYTES = bytes(range(256))
HEADER_NAMES = ("trace-id", "content-type", "retry", "x", "größe")  # some repeat in a record
BACKWARD_EVERY = 997  # roughly how often the timestamp steps back


def _special(i: int, null_header_values: bool) -> dict[str, Any] | None:
    """The fixed records at the head of every list (None past them)."""
    null = None if null_header_values else b"<null>"
    specials: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
        (b"key-0", ALL_BYTES, []),
        (None, b"null key", []),
        (b"", b"empty key", []),
        (b"null value", None, []),
        (b"empty value", b"", []),
        (None, None, []),
        (b"", b"", []),
        (ALL_BYTES[::-1], ALL_BYTES * 3, [("bin", ALL_BYTES)]),
        (b"k", b"several headers", [("a", b"1"), ("b", b"2"), ("c", b"3"), ("d", b"")]),
        (b"k", b"duplicate names", [("dup", b"first"), ("dup", b"second"), ("dup", b"first")]),
        (b"k", b"null header value", [("n", null), ("n", b""), ("m", null)]),
        (b"k", b"non-ascii name", [("größe", "ünïcödé".encode()), ("\u2603", b"\x00\xff")]),
        (bytes([0]), bytes([0]), [("zero", bytes([0]))]),
        (b"\xff" * 40, b"compressible " * 200, [("x", b"y")]),
    ]
    if i >= len(specials):
        return None
    key, value, headers = specials[i]
    return {"key": key, "value": value, "headers": headers}


def _random_bytes(rng: random.Random, size: int) -> bytes:
    return rng.getrandbits(8 * size).to_bytes(size, "little") if size else b""


def _random_record(rng: random.Random, i: int, null_header_values: bool) -> dict[str, Any]:
    r = rng.random()
    if r < 0.15:
        key: bytes | None = None
    elif r < 0.20:
        key = b""
    elif r < 0.70:
        key = f"key-{i}".encode()
    else:
        key = _random_bytes(rng, rng.randint(1, 40))

    r = rng.random()
    if r < 0.05:
        value: bytes | None = None
    elif r < 0.10:
        value = b""
    elif r < 0.20:
        value = (f"value {i} " * rng.randint(1, 60)).encode()  # compresses well
    elif r < 0.22:
        value = _random_bytes(rng, rng.randint(1000, 4000))
    else:
        value = _random_bytes(rng, rng.randint(1, 250))

    headers: list[tuple[str, bytes | None]] = []
    if rng.random() < 0.6:
        for _ in range(rng.randint(1, 4)):
            name = rng.choice(HEADER_NAMES)
            r = rng.random()
            if r < 0.1:
                hvalue: bytes | None = None if null_header_values else b"<null>"
            elif r < 0.2:
                hvalue = b""
            else:
                hvalue = _random_bytes(rng, rng.randint(1, 30))
            headers.append((name, hvalue))
    return {"key": key, "value": value, "headers": headers}


def make_records(n: int, seed: int, *, null_header_values: bool = True) -> list[dict[str, Any]]:
    """n records, the same for the same (n, seed); see the module docstring.

    Timestamps start at BASE_TIMESTAMP and step by 0..3 ms (0 often enough that equal
    neighbours are common); roughly every BACKWARD_EVERY records, and always at n // 3
    and 2 * n // 3 when n >= 30, the step is -50..-400 ms instead.
    With ``null_header_values=False`` null header values become b"<null>".
    """
    rng = random.Random(seed)
    forced_back = {n // 3, 2 * n // 3} if n >= 30 else set()
    records = []
    ts = BASE_TIMESTAMP + (seed % 1000) * 1000
    for i in range(n):
        record = _special(i, null_header_values) or _random_record(rng, i, null_header_values)
        if i:
            if i in forced_back or rng.random() < 1 / BACKWARD_EVERY:
                ts -= rng.randint(50, 400)
            else:
                ts += rng.choice((0, 0, 1, 1, 2, 3))
        records.append({"partition": None, **record, "timestamp": ts})
    return records


def backward_steps(records: Sequence[dict[str, Any]]) -> list[int]:
    """Indexes i where records[i]'s timestamp is below records[i - 1]'s."""
    return [
        i for i in range(1, len(records)) if records[i]["timestamp"] < records[i - 1]["timestamp"]
    ]


def expected_offset_for_time(
    records: Sequence[dict[str, Any]], t: int, first_offset: int = 0
) -> tuple[int, int]:
    """Kafka's ListOffsets by timestamp: (offset, timestamp) of the first record whose
    timestamp is >= t, or (-1, -1) when there is none."""
    for i, record in enumerate(records):
        if record["timestamp"] >= t:
            return first_offset + i, record["timestamp"]
    return -1, -1


# --------------------------------------------------------------------------- comparing


def _show(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars of repr)"


def _bytes_diff(expected: bytes | None, actual: Any) -> str:
    if expected is None or actual is None or not isinstance(actual, bytes | bytearray):
        return f"expected {_show(expected)}, got {_show(actual)}"
    actual = bytes(actual)
    pos = next(
        (i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b),
        min(len(expected), len(actual)),
    )
    lo = max(0, pos - 8)
    return (
        f"lengths expected {len(expected)}, got {len(actual)}; first difference at byte {pos}: "
        f"expected [{lo}:{pos + 8}] {expected[lo : pos + 8].hex(' ')}, "
        f"got {actual[lo : pos + 8].hex(' ')}"
    )


def _headers_diff(expected: list[tuple[str, bytes | None]], actual: Any) -> str:
    actual = list(actual or [])
    lines = [f"expected {len(expected)} header(s), got {len(actual)}"]
    for j in range(max(len(expected), len(actual))):
        e = expected[j] if j < len(expected) else "<missing>"
        a = actual[j] if j < len(actual) else "<missing>"
        if e != a:
            lines.append(f"  header #{j}: expected {_show(e)}, got {_show(a)}")
            if isinstance(e, tuple) and isinstance(a, tuple | list) and len(a) == 2:
                if e[0] == a[0]:
                    lines.append("    value: " + _bytes_diff(e[1], a[1]))
            break
    return "\n".join(lines)


def _same_bytes(expected: bytes | None, actual: Any) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    return isinstance(actual, bytes | bytearray | memoryview) and bytes(actual) == expected


def _same_headers(expected: list[tuple[str, bytes | None]], actual: Any) -> bool:
    actual = list(actual or [])
    return len(expected) == len(actual) and all(
        isinstance(a, tuple | list) and len(a) == 2 and a[0] == e[0] and _same_bytes(e[1], a[1])
        for e, a in zip(expected, actual, strict=True)
    )


def first_mismatch(
    produced: Sequence[dict[str, Any]],
    consumed: Sequence[dict[str, Any]],
    first_offset: int,
    *,
    partition: int | None = None,
    timestamp_type: int | None = 0,
) -> str | None:
    """A description of the first difference, or None when consumed matches produced."""
    for i, (p, c) in enumerate(zip(produced, consumed, strict=False)):
        offset = first_offset + i
        where = f"record #{i} (expected offset {offset})"
        problems = []
        if c.get("offset") != offset:
            problems.append(f"offset: expected {offset}, got {c.get('offset')!r}")
        if partition is not None and c.get("partition") != partition:
            problems.append(f"partition: expected {partition}, got {c.get('partition')!r}")
        for name in ("key", "value"):
            if not _same_bytes(p[name], c.get(name)):
                problems.append(f"{name}: " + _bytes_diff(p[name], c.get(name)))
        if not _same_headers(p["headers"], c.get("headers")):
            problems.append("headers: " + _headers_diff(p["headers"], c.get("headers")))
        if c.get("timestamp") != p["timestamp"]:
            problems.append(f"timestamp: expected {p['timestamp']}, got {c.get('timestamp')!r}")
        if timestamp_type is not None and c.get("timestamp_type") != timestamp_type:
            problems.append(
                f"timestamp_type: expected {timestamp_type}, got {c.get('timestamp_type')!r}"
            )
        if problems:
            return (
                f"{where} differs ({len(produced)} produced, {len(consumed)} consumed):\n  "
                + "\n  ".join(problems)
                + f"\n  produced: {_show(p, 300)}\n  consumed: {_show(c, 300)}"
            )
    if len(produced) != len(consumed):
        n = min(len(produced), len(consumed))
        extra = (
            f"first missing: {_show(produced[n], 200)}"
            if len(produced) > n
            else f"first extra: {_show(consumed[n], 200)}"
        )
        return (
            f"{len(produced)} records produced, {len(consumed)} consumed; the first {n} "
            f"match (offsets {first_offset}..{first_offset + n - 1}); {extra}"
        )
    return None


def assert_same(
    produced: Sequence[dict[str, Any]],
    consumed: Sequence[dict[str, Any]],
    first_offset: int,
    *,
    partition: int | None = None,
    timestamp_type: int | None = 0,
) -> None:
    """Fail unless consumed[i] is produced[i] at offset first_offset + i for every i.

    Keys, values and header values are compared byte for byte (None is not b""),
    header names and order exactly, timestamps exactly, timestamp_type against
    ``timestamp_type`` (0 CreateTime; None skips it) and partition when given.
    """
    problem = first_mismatch(
        produced, consumed, first_offset, partition=partition, timestamp_type=timestamp_type
    )
    if problem:
        raise AssertionError(problem)
