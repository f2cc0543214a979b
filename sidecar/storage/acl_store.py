"""ACL bindings in Redis, shared by every sidecar (sidecar/security/acls/).

`skiff:{acls}` is a hash whose fields are the bindings (their JSON, so a binding is
stored once) and `skiff:{acls}:version` counts changes; lua/acls.lua changes both at
once and PUBLISHes the new version on `skiff:acls:changed`. A sidecar holds all
bindings in memory and re-reads them when the version it sees differs from the one it
loaded: at once on the notification, and at the latest at the next periodic check (a
missed message, a lost subscription, a Redis Cluster whose other node is subscribed)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from redis.asyncio import Redis

from sidecar.storage import keys, resilience, scripts

log = logging.getLogger(__name__)


class AclStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def version(self) -> int:
        return int(await self.redis.get(keys.ACLS_VERSION) or 0)

    async def load(self) -> tuple[int, list[bytes]]:
        """(version, every binding). The version is read first: a change landing between
        the two reads leaves a newer version in Redis than the one returned, so the next
        check loads again."""
        version = await self.version()
        return version, list(await self.redis.hkeys(keys.ACLS))

    async def _change(self, command: str, bindings: list[str]) -> tuple[int, list[bool]]:
        reply = await scripts.ACLS(
            self.redis, [keys.ACLS, keys.ACLS_VERSION], [command, keys.ACLS_CHANNEL, *bindings]
        )
        return int(reply[0]), [bool(n) for n in reply[1]]

    async def add(self, bindings: list[str]) -> int:
        """Store the bindings (those stored already stay); returns the version after."""
        version, _ = await self._change("add", bindings)
        return version

    async def remove(self, bindings: list[str]) -> tuple[int, list[bool]]:
        """(version after, per binding: whether this call removed it). Not resent once
        it may have run, so the answer never misses what an earlier attempt removed."""
        with resilience.no_resend():
            return await self._change("remove", bindings)

    async def changes(self, interval_s: float) -> AsyncIterator[None]:
        """Yields when a change is announced and every `interval_s` besides (the caller
        compares versions each time). Resubscribes after a lost connection."""
        lost = False
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(keys.ACLS_CHANNEL)
                if lost:
                    log.warning("ACL change subscription restored")
                    lost = False
                yield  # changes may have happened while unsubscribed
                while True:
                    await pubsub.get_message(timeout=interval_s)
                    yield
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection lost: check by polling until back
                if not lost:
                    log.warning("ACL change subscription lost (%s); resubscribing", exc)
                    lost = True
                yield
                await asyncio.sleep(min(interval_s, 0.5))
            finally:
                try:
                    await asyncio.wait_for(pubsub.aclose(), 2.0)
                except Exception:  # the connection is dead already
                    pass
