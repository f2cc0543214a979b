"""Kafka's StandardAuthorizer over ACLs kept in Redis (sidecar/storage/acl_store.py).

Every sidecar holds all bindings in an AclIndex and answers `authorize` from it, with
no Redis round trip. It re-reads the bindings when the version counter in Redis differs
from the one it loaded: at once when a change is announced (pub/sub), and at the latest
after REFRESH_S (a missed announcement, a lost subscription). The sidecar that makes a
change (CreateAcls, DeleteAcls) reloads before it answers, so its own next request sees
the change; other sidecars see it within milliseconds, REFRESH_S at worst. Kafka
promises no more: its brokers apply ACL records from the metadata log asynchronously."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from redis.asyncio import Redis

from sidecar.config.settings import Settings
from sidecar.security.acls.index import AclIndex
from sidecar.security.acls.model import AclBinding, AclFilter
from sidecar.security.authorizer import (
    SUPPORTED_OPERATIONS,
    AllowAll,
    Authorizer,
    Operation,
    ResourceType,
    operations_bitfield,
)
from sidecar.security.session import ConnectionSecurity
from sidecar.storage.acl_store import AclStore
from sidecar.telemetry.logs import RateLimitedLog

log = logging.getLogger(__name__)

# authorizer.class.name values that turn this authorizer on (Kafka's, and Skiff's short one)
STANDARD = "standard"
STANDARD_NAMES = (STANDARD, "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
REFRESH_S = 1.0  # the longest a sidecar follows an announced-but-missed change
# Kafka's controller writes at most this many ACL records per request (its
# MAX_RECORDS_PER_USER_OP); beyond it the request changes nothing and gets
# POLICY_VIOLATION with TOO_LARGE.
MAX_CHANGES = 10_000
TOO_LARGE = "Unable to perform excessively large batch operation."


class TooManyChanges(Exception):
    """More than MAX_CHANGES bindings would change in one request."""


class StandardAuthorizer:
    def __init__(
        self,
        store: AclStore,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.refresh_s = refresh_s
        self.index = AclIndex()
        self.version = -1  # the Redis version the index was loaded at; -1: not loaded
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._log = RateLimitedLog(log)

    # -- the Authorizer interface (synchronous, from memory) ------------------------------

    def authorize(
        self,
        security: ConnectionSecurity,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        who = security.principal
        principal = f"{who.type}:{who.name}"  # str(who), without a Python-level call
        if principal in self.super_users:
            return True
        decision = self.index.decide(principal, security.peer_host, operation, resource_type, name)
        if decision is None:
            return self.allow_everyone_if_no_acl_found
        return decision

    def authorized_operations(
        self, security: ConnectionSecurity, resource_type: ResourceType, name: str
    ) -> int:
        return operations_bitfield(
            {
                op
                for op in SUPPORTED_OPERATIONS.get(resource_type, frozenset())
                if self.authorize(security, op, resource_type, name)
            }
        )

    # -- keeping the index current -----------------------------------------------------

    async def start(self) -> None:
        """Load the ACLs (requests are served only after this) and follow changes."""
        await self.refresh()
        self._task = asyncio.create_task(self._follow(), name="skiff-acls")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def refresh(self) -> None:
        """Reload the bindings if Redis holds another version than the index."""
        async with self._lock:
            if await self.store.version() == self.version:
                return
            version, stored = await self.store.load()
            bindings = []
            for text in stored:
                try:
                    bindings.append(AclBinding.decode(text))
                except (ValueError, TypeError) as exc:  # written by something else
                    self._log.warning("ignoring an unreadable ACL in Redis (%s): %r", exc, text)
            self.index = AclIndex(bindings)
            if self.version >= 0:
                log.info("ACLs changed: %d bindings (version %d)", len(bindings), version)
            self.version = version

    async def _follow(self) -> None:
        async for _ in self.store.changes(self.refresh_s):
            try:
                await self.refresh()
            except Exception as exc:  # Redis unavailable: keep the last ACLs, retry
                self._log.warning("cannot re-read the ACLs from Redis (%s); keeping the last", exc)

    # -- CreateAcls, DescribeAcls, DeleteAcls --------------------------------------------

    def describe(self, acl_filter: AclFilter) -> list[AclBinding]:
        return [acl for acl in self.index.bindings if acl_filter.matches(acl)]

    def _encoded(self) -> list[str]:
        return [acl.encode() for acl in self.index.bindings]

    async def create(self, bindings: list[AclBinding]) -> None:
        """Store valid bindings (AclBinding.validate); existing ones stay as they are.
        Raises TooManyChanges (and stores nothing) beyond MAX_CHANGES new bindings."""
        wanted = {acl.encode() for acl in bindings}
        if len(wanted) > MAX_CHANGES and len(wanted - set(self._encoded())) > MAX_CHANGES:
            raise TooManyChanges
        if bindings:
            await self.store.add([acl.encode() for acl in bindings])
        await self.refresh()

    async def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Per filter, the bindings it matched that this call removed. Matched against
        Redis, not the index, so a binding created elsewhere a moment ago is seen.
        Raises TooManyChanges (and removes nothing) beyond MAX_CHANGES bindings."""
        _, stored = await self.store.load()
        current: list[AclBinding] = []
        for text in stored:
            try:
                current.append(AclBinding.decode(text))
            except (ValueError, TypeError):
                continue
        matched = [[acl for acl in current if f.matches(acl)] for f in filters]
        targets = sorted({acl.encode() for acls in matched for acl in acls})
        if len(targets) > MAX_CHANGES:
            raise TooManyChanges
        removed: set[str] = set()
        if targets:
            _, done = await self.store.remove(targets)
            removed = {text for text, gone in zip(targets, done, strict=True) if gone}
        await self.refresh()
        return [[acl for acl in acls if acl.encode() in removed] for acls in matched]


def parse_class_name(text: str) -> str:
    """authorizer.class.name -> "" (none) or STANDARD; ValueError for others."""
    name = text.strip()
    if not name:
        return ""
    if name in STANDARD_NAMES:
        return STANDARD
    raise ValueError(
        f"unknown authorizer {name!r}: Skiff has Kafka's StandardAuthorizer "
        f"({STANDARD_NAMES[1]}, or {STANDARD}); empty for none"
    )


async def start(settings: Settings, redis: Redis) -> Authorizer:
    """The authorizer `settings` ask for, loaded and following changes."""
    if not settings.authorizer_class_name:
        return AllowAll()
    authorizer = StandardAuthorizer(
        AclStore(redis), settings.super_users, settings.allow_everyone_if_no_acl_found
    )
    await authorizer.start()
    log.info(
        "ACL authorizer on: %d ACLs, super.users %s, allow.everyone.if.no.acl.found=%s",
        len(authorizer.index),
        ";".join(sorted(authorizer.super_users)) or "(none)",
        str(settings.allow_everyone_if_no_acl_found).lower(),
    )
    return authorizer


async def stop(authorizer: Authorizer) -> None:
    if isinstance(authorizer, StandardAuthorizer):
        await authorizer.stop()
