"""A segment object: consecutive stored batches of one partition, each with its base
offset written in, back to back: Kafka's own log segment format, so `kafka-dump-log`
reads one as it reads a `.log` file. The batches' headers are the segment's index
(base offset, last offset delta, max timestamp): a reader walks them, reading only
the 61 bytes of each header."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from sidecar.protocol import stored_batch

_OFFSET_LENGTH = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
_MAX_TS = struct.Struct(">q")
_LAST_DELTA_AT = 23
_MAX_TS_AT = 35
_HEADER = 61


class CorruptSegment(Exception):
    """A segment object whose batches do not parse: never served."""


@dataclass(frozen=True, slots=True)
class Segment:
    """One archived segment, as the partition's segment list holds it."""

    base: int  # the first batch's base offset
    end: int  # the last batch's last offset + 1
    size: int  # bytes
    max_timestamp: int
    bytes_before: int  # bytes appended to the partition before `base` (byte index)
    path: str

    def member(self) -> str:
        return f"{self.end} {self.size} {self.max_timestamp} {self.bytes_before} {self.path}"

    @classmethod
    def parse(cls, member: bytes | str, score: float) -> Segment:
        text = member.decode() if isinstance(member, bytes) else member
        end, size, max_ts, before, path = text.split(" ", 4)
        return cls(int(score), int(end), int(size), int(max_ts), int(before), path)


def encode(entries: list[Any]) -> tuple[bytes, int, int, int]:
    """Stored batch entries (a raw XRANGE reply) as segment bytes; returns (bytes, base
    offset, end offset, max timestamp)."""
    parts = [stored_batch.placed(entry_id, fields[1]) for entry_id, fields in entries]
    max_ts = max(_MAX_TS.unpack_from(part, _MAX_TS_AT)[0] for part in parts)
    first_id, first_fields = entries[0]
    base = stored_batch.base_offset(first_id, first_fields[1])
    end = stored_batch.last_offset(entries[-1][0]) + 1
    return b"".join(parts), base, end, max_ts


def batches(data: bytes) -> list[tuple[int, int, int, int]]:
    """(position, size, last offset, max timestamp) of each batch; CorruptSegment when a
    length runs past the object or below a batch header (every read is bounded by it)."""
    out = []
    pos = 0
    total = len(data)
    while pos < total:
        if pos + _HEADER > total:
            raise CorruptSegment(f"a batch header at byte {pos} runs past the segment")
        base, length = _OFFSET_LENGTH.unpack_from(data, pos)
        size = 12 + length
        if size < _HEADER or pos + size > total:
            raise CorruptSegment(f"the batch at byte {pos} claims {length} bytes")
        (delta,) = _LAST_DELTA.unpack_from(data, pos + _LAST_DELTA_AT)
        (max_ts,) = _MAX_TS.unpack_from(data, pos + _MAX_TS_AT)
        out.append((pos, size, base + delta, max_ts))
        pos += size
    return out


def entries_from(data: bytes, offset: int, max_bytes: int) -> list[Any]:
    """The segment's batches from the one holding `offset` on, as stored batch entries
    (raw XRANGE shape: [b"0-<last + 1>", [b"b", batch]]), whole batches within
    max_bytes, the first whatever its size."""
    out: list[Any] = []
    size = 0
    for pos, length, last, _ in batches(data):
        if last < offset:
            continue
        if out and size + length > max_bytes:
            break
        out.append((b"0-%d" % (last + 1), [stored_batch.FIELD, data[pos : pos + length]]))
        size += length
    return out
