"""The "consumer" protocol type's subscription blob (ConsumerProtocolSubscription, not
flexible): int16 version, int32 count of int16-length topic names, then fields the
broker does not need. The coordinator reads only the topics (OffsetDelete refuses
subscribed topics; offset expiry keeps them)."""

from __future__ import annotations

import struct

CONSUMER = "consumer"


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics a subscription names; None when the blob does not parse."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, set()
        for _ in range(count):
            (size,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if size < 0 or pos + size > len(metadata):
                return None
            topics.add(metadata[pos : pos + size].decode())
            pos += size
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def _string(data: bytes, pos: int) -> tuple[str, int]:
    (size,) = struct.unpack_from(">h", data, pos)
    pos += 2
    if size < 0 or pos + size > len(data):
        raise struct.error("bad string")
    return data[pos : pos + size].decode(), pos + size


def _topic_partitions(data: bytes, pos: int) -> tuple[set[tuple[str, int]], int]:
    (count,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: set[tuple[str, int]] = set()
    for _ in range(max(count, 0)):
        topic, pos = _string(data, pos)
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + 4 * n > len(data):
            raise struct.error("bad partitions")
        out.update((topic, p) for p in struct.unpack_from(f">{n}i", data, pos))
        pos += 4 * n
    return out, pos


def parse_subscription(metadata: bytes) -> tuple[list[str], set[tuple[str, int]]] | None:
    """(topics, owned partitions) of a ConsumerProtocolSubscription (owned: v1+, else
    empty); None when the blob does not parse. Used for classic members of a KIP-848
    group, whose assignment the broker computes."""
    try:
        (version,) = struct.unpack_from(">h", metadata, 0)
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, []
        for _ in range(max(count, 0)):
            topic, pos = _string(metadata, pos)
            topics.append(topic)
        owned: set[tuple[str, int]] = set()
        if version >= 1:
            (size,) = struct.unpack_from(">i", metadata, pos)  # user data
            pos += 4 + max(size, 0)
            if pos > len(metadata):
                return None
            owned, pos = _topic_partitions(metadata, pos)
        return sorted(set(topics)), owned
    except (struct.error, UnicodeDecodeError):
        return None


def encode_assignment(assignment: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0 (no user data) for a classic member's SyncGroup."""
    out = [struct.pack(">hi", 0, len(assignment))]
    for topic, partitions in sorted(assignment.items()):
        name = topic.encode()
        out.append(struct.pack(f">h{len(name)}si", len(name), name, len(partitions)))
        out.append(struct.pack(f">{len(partitions)}i", *partitions))
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def parse_assignment(data: bytes) -> set[tuple[str, int]] | None:
    """The partitions of a ConsumerProtocolAssignment; None when it does not parse."""
    if not data:
        return set()
    try:
        pairs, _ = _topic_partitions(data, 2)
        return pairs
    except (struct.error, UnicodeDecodeError):
        return None
