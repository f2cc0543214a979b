"""A queue group's committed offsets for OffsetFetch (and so kafka-consumer-groups and
admin clients' lag): per partition the lowest offset not yet finished."""

from __future__ import annotations

from sidecar.queues.core import QueueStore
from sidecar.storage.group_store import CommittedOffset


async def queue_offsets(
    queues: QueueStore, group: str, wanted: list[tuple[str, int]] | None
) -> dict[tuple[str, int], CommittedOffset]:
    """Committed offsets of `wanted` (None: every partition the group has read);
    partitions the group has not read are left out (OffsetFetch answers -1)."""
    if wanted is None:
        wanted = []
        for topic in await queues.topics(group):
            info = await queues.store.get_topic(topic)
            if info is not None:
                wanted += [(topic, p) for p in range(info.partitions)]
    out = {}
    for topic, partition in wanted:
        offset = await queues.committed(group, topic, partition)
        if offset >= 0:
            out[(topic, partition)] = CommittedOffset(offset, -1, "", 0, -1)
    return out
