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
