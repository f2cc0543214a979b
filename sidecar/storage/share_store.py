"""Share groups' Redis calls outside the queue core: membership (sidecar/share/
membership.py) and the records a member holds on a partition (sidecar/share/records.py).

One hash per share group under the group's hash tag, beside the coordinator lease
(keys.group_keys): field `epoch` is the group epoch, field `m:<member id>` a member's
JSON. Written by the coordinator when membership changes (not on every heartbeat), read
when a sidecar takes the group over. `skiff:share_groups` lists the ids (a cluster-wide
key of its own slot, so written apart from the group's hash). Membership writes run in
lua/group_write.lua, fenced by the lease like a classic group's: a sidecar that lost
the group (paused past its registration) writes nothing and is told so (Fenced)."""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis

from sidecar.storage import keys, resilience, scripts
from sidecar.storage.group_store import Fenced

SHARE_GROUPS = "skiff:share_groups"


def share_key(group_id: str) -> str:
    return f"skiff:{{g/{group_id}}}:share"


class ShareStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def exists(self, group_id: str) -> bool:
        return bool(await self.redis.exists(share_key(group_id)))

    async def load(self, group_id: str) -> tuple[int, dict[str, dict[str, Any]]]:
        raw = await self.redis.hgetall(share_key(group_id))
        epoch = int(raw.pop(b"epoch", b"0"))
        members = {f.decode()[2:]: json.loads(v) for f, v in raw.items() if f.startswith(b"m:")}
        return epoch, members

    async def save(
        self,
        group_id: str,
        token: str,
        epoch: int,
        members: dict[str, dict[str, Any]],
        gone: list[str],
    ) -> None:
        """Raises Fenced when `token` no longer holds the group's lease."""
        fields: list[str] = []
        for member_id, doc in members.items():
            fields += (f"m:{member_id}", json.dumps(doc))
        group_keys = [*keys.group_keys(group_id), share_key(group_id)]
        args = [token, "share", epoch, len(gone), *gone, *fields]
        # Not resent once it may have run: an older member list run again after a
        # newer one would bring members back.
        with resilience.no_resend():
            reply = await scripts.GROUP_WRITE(self.redis, group_keys, args)
        if reply != 1:
            raise Fenced(group_id)
        # Another slot than the group's hash: never in the same MULTI (Redis Cluster).
        await self.redis.sadd(SHARE_GROUPS, group_id)

    async def delete(self, group_id: str) -> None:
        await self.redis.delete(share_key(group_id))
        await self.redis.srem(SHARE_GROUPS, group_id)

    async def all_ids(self) -> list[str]:
        return sorted(m.decode() for m in await self.redis.smembers(SHARE_GROUPS))
