"""Redrive: move a queue group's dead-lettered records back to the topic and partition
they came from (the `skiff.dlq.*` headers say where), without those headers, through
the normal append path. The dead-letter topic is read by a queue group of its own,
`skiff-redrive.<group>` (starts at the earliest record), so each dead letter is moved
once even across runs and sidecars; dead letters of other groups are passed over
(finished in that redrive group, left in the topic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sidecar.protocol.record_batch import FLAG_KEY_NULL, FLAG_VALUE_NULL, encode_headers
from sidecar.queues.core import Acquired, Action, QueueError, QueueStore, retention_bytes

PREFIX = "skiff.dlq."
BATCH = 500


def redrive_group(group: str) -> str:
    return f"skiff-redrive.{group}"[:249]


async def redrive(
    queues: QueueStore,
    broker: Any,
    group: str,
    dead_letter_topic: str,
    limit: int,
    may_write: Callable[[str], bool] = lambda topic: True,
) -> tuple[int, int]:
    """Move up to `limit` dead letters of `group`; returns (moved, passed over). Dead
    letters whose topic the caller may not write (`may_write`, the HTTP caller's ACLs)
    are passed over and left leased in the redrive group, so they come back (after its
    lock) for a caller who may."""
    store = broker.store
    info = await store.get_topic(dead_letter_topic)
    if info is None:
        raise QueueError(
            "UNKNOWN_TOPIC_OR_PARTITION", f"dead-letter topic {dead_letter_topic!r} does not exist"
        )
    name = redrive_group(group)
    if not await queues.exists(name):
        await queues.configure(name, auto_offset_reset="earliest", lock_ms=60_000)
    holder = "redrive"
    moved = skipped = 0
    for partition in range(info.partitions):
        while moved < limit:
            got = await queues.acquire(
                name, holder, dead_letter_topic, partition, min(BATCH, limit - moved)
            )
            if not got:
                break
            mine = [r for r in got if _header(r, "group") == group.encode()]
            others = [r.offset for r in got if _header(r, "group") != group.encode()]
            skipped += len(others)
            by_target: dict[tuple[str, int], list[Acquired]] = {}
            for r in mine:
                target = (_header(r, "topic") or b"").decode(), int(_header(r, "partition") or 0)
                by_target.setdefault(target, []).append(r)
            done = list(others)
            for (topic, target_partition), records in by_target.items():
                if not may_write(topic):
                    skipped += len(records)  # not done: a later, allowed redrive moves them
                    continue
                target_info = await store.get_topic(topic)
                if target_info is None or target_partition >= target_info.partitions:
                    skipped += len(records)  # the original topic is gone: leave them be
                    done += [r.offset for r in records]
                    continue
                await _append(store, target_info, topic, target_partition, records)
                moved += len(records)
                done += [r.offset for r in records]
            await queues.settle(name, holder, dead_letter_topic, partition, done, Action.ACCEPT)
    return moved, skipped


def _header(rec: Acquired, name: str) -> bytes | None:
    for key, value in rec.headers:
        if key == PREFIX + name:
            return value
    return None


async def _append(
    store: Any, info: Any, topic: str, partition: int, records: list[Acquired]
) -> None:
    flat: list[Any] = []
    size = 0
    for r in records:
        headers = [(k, v) for k, v in r.headers if not k.startswith(PREFIX)]
        encoded = encode_headers(headers)
        flags = (FLAG_KEY_NULL if r.key is None else 0) | (
            FLAG_VALUE_NULL if r.value is None else 0
        )
        flat += (r.timestamp, r.key or b"", r.value or b"", encoded, flags)
        size += len(r.key or b"") + len(r.value or b"") + len(encoded)
    max_ts = max(r.timestamp for r in records)
    delta = next(i for i, r in enumerate(records) if r.timestamp == max_ts)
    args = [len(records), 0, max_ts, delta, -1, -1, -1, *flat]
    await store.append(store.prepare_records(info, partition, args, size, retention_bytes(info)))
