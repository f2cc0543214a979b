"""Consumer-group state in Redis: the coordinator lease, the group's metadata (as
JSON, written when a generation completes or the group empties) and committed
offsets. Every write goes through lua/group_write.lua, fenced by the lease."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from redis.asyncio import Redis

from sidecar.storage import keys, resilience, scripts

# Lua's unpack() takes at most ~8000 values: commit in chunks of field/value pairs.
CHUNK_PAIRS = 2000


class Fenced(Exception):
    """Another sidecar holds this group's lease now: this one must drop the group."""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_ms: int
    expire_ms: int  # -1: expiry follows offsets.retention.minutes

    def encode(self) -> bytes:
        head = f"{self.offset} {self.leader_epoch} {self.commit_ms} {self.expire_ms} "
        return head.encode() + self.metadata.encode()

    @classmethod
    def decode(cls, raw: bytes) -> CommittedOffset:
        offset, epoch, commit_ms, expire_ms, metadata = raw.split(b" ", 4)
        return cls(int(offset), int(epoch), metadata.decode(), int(commit_ms), int(expire_ms))


def split_field(field: bytes) -> tuple[str, int]:
    topic, _, partition = field.decode().rpartition("/")
    return topic, int(partition)


class GroupStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._listed: set[str] = set()  # groups this process put in skiff:groups

    async def _list(self, group_id: str) -> None:
        """Add to the registry once per process, not on every commit."""
        if group_id not in self._listed:
            await self.redis.sadd(keys.GROUPS, group_id)
            self._listed.add(group_id)

    async def lease_holder(self, group_id: str) -> str | None:
        raw = await self.redis.get(keys.group_keys(group_id)[0])
        return raw.decode() if raw else None

    async def claim(self, group_id: str, token: str, seen_holder: str | None) -> bool:
        reply = await scripts.GROUP_LEASE(
            self.redis, [keys.group_keys(group_id)[0]], [token, seen_holder or ""]
        )
        return reply == 1

    async def exists(self, group_id: str) -> bool:
        _, group, offsets = keys.group_keys(group_id)
        return bool(await self.redis.exists(group, offsets))

    async def load(self, group_id: str) -> bytes | None:
        # Another sidecar may have deleted and unlisted the group meanwhile.
        self._listed.discard(group_id)
        return await self.redis.get(keys.group_keys(group_id)[1])

    async def _write(self, group_id: str, token: str, op: str, *args: object) -> None:
        group_keys = list(keys.group_keys(group_id))
        if op == "release":  # a re-run deletes nothing more
            reply = await scripts.GROUP_WRITE(self.redis, group_keys, [token, op, *args])
        else:
            # Not resent once it may have run: an old commit or group document run again
            # after a newer one would move the group back, and a re-run delete would
            # report itself fenced. The client retries on the retriable error instead.
            with resilience.no_resend():
                reply = await scripts.GROUP_WRITE(self.redis, group_keys, [token, op, *args])
        if reply != 1:
            raise Fenced(group_id)

    async def store(self, group_id: str, token: str, doc: bytes) -> None:
        await self._write(group_id, token, "store", doc)
        await self._list(group_id)

    async def commit(
        self, group_id: str, token: str, offsets: dict[tuple[str, int], CommittedOffset]
    ) -> None:
        pairs: list[object] = []
        for (topic, partition), value in offsets.items():
            pairs += [keys.offset_field(topic, partition), value.encode()]
        for i in range(0, len(pairs), 2 * CHUNK_PAIRS):
            await self._write(group_id, token, "commit", *pairs[i : i + 2 * CHUNK_PAIRS])
        await self._list(group_id)

    async def forget(
        self, group_id: str, token: str, partitions: Iterable[tuple[str, int]]
    ) -> None:
        """Delete the committed offsets of (topic, partition)s."""
        fields = [keys.offset_field(t, p) for t, p in partitions]
        for i in range(0, len(fields), CHUNK_PAIRS):
            await self._write(group_id, token, "forget", *fields[i : i + CHUNK_PAIRS])

    async def delete(self, group_id: str, token: str) -> None:
        await self._write(group_id, token, "delete")
        await self.unlist(group_id)

    async def release(self, group_id: str, token: str) -> None:
        try:
            await self._write(group_id, token, "release")
        except Fenced:
            pass

    async def offsets(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        raw = await self.redis.hgetall(keys.group_keys(group_id)[2])
        return {split_field(f): CommittedOffset.decode(v) for f, v in raw.items()}

    async def offsets_of(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> list[CommittedOffset | None]:
        if not partitions:
            return []
        fields = [keys.offset_field(t, p) for t, p in partitions]
        raw = await self.redis.hmget(keys.group_keys(group_id)[2], fields)
        return [CommittedOffset.decode(v) if v is not None else None for v in raw]

    async def all_group_ids(self) -> list[str]:
        return sorted(
            m.decode(errors="surrogateescape") for m in await self.redis.smembers(keys.GROUPS)
        )

    async def unlist(self, group_id: str) -> None:
        self._listed.discard(group_id)
        await self.redis.srem(keys.GROUPS, group_id)
