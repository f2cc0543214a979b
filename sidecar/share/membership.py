"""Share-group membership (KIP-932's ShareGroupHeartbeat) for the groups this sidecar
coordinates.

Coordination uses the classic groups' lease (storage/group_store.py, one lease key per
group id): FindCoordinator answers the same sidecar for either kind, and a group id is
either a classic group or a share group, never both. Members, their epochs and
subscriptions live in memory here and are written to Redis (storage/share_store.py)
when membership changes, so a sidecar taking the group over keeps its members and a
share session opened on any sidecar can check that its member belongs to the group.

Assignment: Kafka's `simple` share assignor (share/assignor.py) spreads the partitions
of the subscribed topics over the members, sharing a partition only when there are
more members than partitions; the group's target assignment is recomputed on every
heartbeat (sticky: members keep their partitions while balance allows). As in Kafka, a
member is given its part of the target only in answer to its own heartbeat, and
ShareGroupDescribe shows what each member was given: a member that has not heartbeated
since another joined still reads (and is described with) its old partitions. The group
epoch grows on every change of membership, subscriptions, partition counts or target
assignment; a member's epoch is the group epoch its current assignment was computed at."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sidecar.groups.coordinator import CoordinatorError
from sidecar.groups.group_configs import SHARE_SESSION
from sidecar.queues.core import QueueError, queue_store
from sidecar.share.assignor import assign
from sidecar.storage import resilience
from sidecar.storage.group_store import Fenced
from sidecar.storage.share_store import ShareStore

log = logging.getLogger("skiff.share")

TICK_SECONDS = 0.5
ASSIGNOR = "simple"


@dataclass(slots=True)
class ShareMember:
    member_id: str
    epoch: int = 0
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    topics: list[str] = field(default_factory=list)
    # (topic id, topic name, partitions) as last sent to the member
    assignment: list[tuple[uuid.UUID, str, list[int]]] = field(default_factory=list)
    # its part of the group's target assignment, sent with its next heartbeat answer
    target: list[tuple[uuid.UUID, str, list[int]]] = field(default_factory=list)
    deadline: float = 0.0

    def doc(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "rack_id": self.rack_id,
            "topics": self.topics,
            # what the console shows (a taking-over coordinator computes it anew)
            "assignment": [[name, partitions] for _, name, partitions in self.assignment],
        }


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"


@dataclass(slots=True)
class HeartbeatResult:
    error: str = "NONE"
    message: str | None = None
    member_id: str | None = None
    epoch: int = 0
    assignment: list[tuple[uuid.UUID, str, list[int]]] | None = None


class ShareCoordinator:
    def __init__(self, broker: Any, on_gone: Callable[[str, str], Awaitable[None]]) -> None:
        self.broker = broker
        self.store = ShareStore(broker.store.redis)
        self.groups: dict[str, ShareGroup] = {}
        self._loading: dict[str, asyncio.Lock] = {}
        self._on_gone = on_gone  # (group, member) left or expired: release its records
        self._task: asyncio.Task[None] | None = None
        broker.cluster.on_lost(self.groups.clear)

    def session_s(self, group_id: str) -> float:
        """The group's share.session.timeout.ms (sidecar/groups/group_configs.py), else
        the server's --group-share-session-timeout-ms."""
        default = self.broker.settings.group_share_session_timeout_ms
        return self.broker.groups.configs.get(group_id, SHARE_SESSION, default) / 1000

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._ticker(), name="skiff-share-groups")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        held = list(self.groups)
        self.groups.clear()
        for group_id in held:
            try:
                await self.broker.groups.store.release(group_id, self.broker.cluster.token)
            except Exception as exc:
                log.warning("could not release share group %r: %s", group_id, exc)

    # -- ownership ----------------------------------------------------------------

    async def coordinate(self, group_id: str, create: bool) -> ShareGroup | None:
        """The group if this sidecar coordinates it (claiming a free lease); None when
        it does not exist and `create` is false. Raises CoordinatorError."""
        classic = self.broker.groups
        cluster = self.broker.cluster
        if classic.closing:
            raise CoordinatorError("NOT_COORDINATOR")
        if not cluster.owns_leases() and not await cluster.wait_owns_leases(resilience.remaining()):
            raise CoordinatorError("COORDINATOR_NOT_AVAILABLE")
        group = self.groups.get(group_id)
        if group is not None:
            return group
        lock = self._loading.setdefault(group_id, asyncio.Lock())
        try:
            async with lock:
                group = self.groups.get(group_id)
                if group is not None:
                    return group
                token = cluster.token
                holder = await classic.store.lease_holder(group_id)
                if holder != token:
                    if holder is not None and await cluster.live_holder(holder):
                        raise CoordinatorError("NOT_COORDINATOR")
                exists = await self.store.exists(group_id)
                if not exists and (
                    group_id in classic.groups or await classic.store.exists(group_id)
                ):
                    # A classic group of that id: Kafka answers "not a share group".
                    raise CoordinatorError("GROUP_ID_NOT_FOUND")
                if not exists and not create:
                    return None
                if holder != token:
                    if not await classic.store.claim(group_id, token, holder):
                        raise CoordinatorError("NOT_COORDINATOR")
                    if holder is not None:
                        log.info("took over share group %r from %s", group_id, holder)
                epoch, docs = await self.store.load(group_id)
                if token != cluster.token or not cluster.owns_leases():
                    raise CoordinatorError("NOT_COORDINATOR")
                group = ShareGroup(group_id, epoch)
                now = time.monotonic()
                for member_id, doc in docs.items():
                    group.members[member_id] = ShareMember(
                        member_id,
                        int(doc.get("epoch", 0)),
                        doc.get("client_id", ""),
                        doc.get("client_host", ""),
                        doc.get("rack_id"),
                        list(doc.get("topics", [])),
                        deadline=now + self.session_s(group_id),
                    )
                await self._assign(group)
                self.groups[group_id] = group
                self.start()
                return group
        finally:
            if not lock.locked() and self._loading.get(group_id) is lock:
                del self._loading[group_id]

    async def _save(self, group: ShareGroup, gone: list[str]) -> None:
        docs = {m.member_id: m.doc() for m in group.members.values()}
        await self.store.save(group.group_id, self.broker.cluster.token, group.epoch, docs, gone)

    async def _assign(self, group: ShareGroup) -> bool:
        """Recompute the target assignment (sticky to the previous target); whether any
        member's part changed. What members were sent changes in heartbeat()."""
        ids: dict[str, uuid.UUID] = {}
        counts: dict[str, int] = {}
        for name in sorted({t for m in group.members.values() for t in m.topics}):
            info = await self.broker.store.get_topic(name)
            if info is not None:
                ids[name], counts[name] = info.topic_id, info.partitions
        current = {
            m.member_id: {(name, p) for _, name, parts in m.target for p in parts}
            for m in group.members.values()
        }
        target = assign({m.member_id: m.topics for m in group.members.values()}, counts, current)
        changed = False
        for member in group.members.values():
            by_topic: dict[str, list[int]] = {}
            for name, p in target.get(member.member_id, ()):
                by_topic.setdefault(str(name), []).append(p)
            new = [(ids[n], n, sorted(ps)) for n, ps in sorted(by_topic.items())]
            if new != member.target:
                member.target = new
                changed = True
        return changed

    # -- heartbeat ----------------------------------------------------------------

    async def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        topics: list[str] | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        if not group_id:
            return HeartbeatResult("INVALID_REQUEST", "GroupId can't be empty.")
        if not member_id:
            return HeartbeatResult("INVALID_REQUEST", "MemberId can't be empty.")
        if member_epoch < -1:
            return HeartbeatResult("INVALID_REQUEST", "MemberEpoch is invalid.")
        if member_epoch == 0 and not topics:
            return HeartbeatResult(
                "INVALID_REQUEST", "SubscribedTopicNames must be set in first request."
            )
        try:
            group = await self.coordinate(group_id, create=member_epoch == 0)
            if member_epoch == 0:
                # The queue group the members' records live in (sidecar/queues/).
                await queue_store(self.broker).config(group_id, create=True)
        except CoordinatorError as exc:
            return HeartbeatResult(exc.code)
        except QueueError as exc:
            code = "GROUP_ID_NOT_FOUND" if exc.code == "GROUP_ID_CONFLICT" else exc.code
            return HeartbeatResult(code, exc.message)
        if member_epoch == -1:
            return await self._leave(group, member_id)
        if group is None:
            return HeartbeatResult(
                "UNKNOWN_MEMBER_ID", f"Member {member_id} is not a member of group {group_id}."
            )
        member = group.members.get(member_id)
        changed = False
        send = False
        if member_epoch == 0:
            if member is None:
                member = ShareMember(member_id)
                group.members[member_id] = member
            changed = True
            send = True
        elif member is None:
            return HeartbeatResult(
                "UNKNOWN_MEMBER_ID", f"Member {member_id} is not a member of group {group_id}."
            )
        elif member_epoch != member.epoch:
            which = "larger" if member_epoch > member.epoch else "smaller"
            return HeartbeatResult(
                "FENCED_MEMBER_EPOCH",
                f"The share group member has a {which} member epoch ({member_epoch}) than "
                f"the one known by the group coordinator ({member.epoch}).",
            )
        member.deadline = time.monotonic() + self.session_s(group_id)
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if topics is not None and sorted(topics) != sorted(member.topics):
            member.topics = list(topics)
            changed = True
        if await self._assign(group):
            changed = True
        if member.target != member.assignment:
            member.assignment = member.target
            send = True
        if changed:
            group.epoch += 1
            member.epoch = group.epoch
            if not await self._persist(group, []):
                return HeartbeatResult("NOT_COORDINATOR", None)
        elif member.epoch < group.epoch:
            # Others joined or left: as in Kafka, every member moves to the group's epoch
            # and is sent its (unchanged) assignment with it.
            member.epoch = group.epoch
            send = True
            # A sidecar taking over knows the new epoch.
            if not await self._persist(group, []):
                return HeartbeatResult("NOT_COORDINATOR", None)
        return HeartbeatResult(
            "NONE",
            None,
            member_id,
            member.epoch,
            member.assignment if send or member_epoch != member.epoch else None,
        )

    async def _persist(self, group: ShareGroup, gone: list[str]) -> bool:
        """False when another sidecar took the group over: it is dropped here."""
        try:
            await self._save(group, gone)
        except Fenced:
            log.warning("share group %r was taken over by another sidecar", group.group_id)
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
            return False
        except Exception as exc:  # membership stays in memory; the next change writes it
            log.warning("could not store share group %r: %s", group.group_id, exc)
        return True

    async def _leave(self, group: ShareGroup | None, member_id: str) -> HeartbeatResult:
        if group is None or member_id not in group.members:
            return HeartbeatResult(
                "UNKNOWN_MEMBER_ID", f"Member {member_id} is not a member of the group."
            )
        await self._remove(group, member_id, "left")
        return HeartbeatResult("NONE", None, member_id, -1)

    async def _remove(self, group: ShareGroup, member_id: str, why: str) -> None:
        group.members.pop(member_id, None)
        group.epoch += 1
        try:  # the others are given its partitions with their next heartbeat answers
            await self._assign(group)
        except Exception as exc:
            log.warning("share group %r: reassigning failed: %s", group.group_id, exc)
        log.info("share group %r: member %s %s", group.group_id, member_id, why)
        await self._persist(group, [member_id])
        try:
            await self._on_gone(group.group_id, member_id)
        except Exception as exc:
            log.warning("share group %r: releasing %s failed: %s", group.group_id, member_id, exc)

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            now = time.monotonic()
            for group in list(self.groups.values()):
                for member in list(group.members.values()):
                    if member.deadline <= now:
                        with resilience.request_deadline(None):
                            await self._remove(group, member.member_id, "session expired")

    # -- admin ----------------------------------------------------------------------

    async def describe(self, group_id: str) -> ShareGroup | None:
        return await self.coordinate(group_id, create=False)

    async def delete(self, group_id: str) -> str:
        """DeleteGroups of a share (queue) group: only an empty one, as in Kafka; its
        positions, leases and config go (sidecar/queues/core.py delete), records stay."""
        group = await self.coordinate(group_id, create=True)
        if group is not None and group.members:
            return "NON_EMPTY_GROUP"
        await queue_store(self.broker).delete(group_id)
        await self.store.delete(group_id)
        self.groups.pop(group_id, None)
        await self.broker.groups.store.release(group_id, self.broker.cluster.token)
        log.info("deleted share group %r", group_id)
        return "NONE"

    async def listed(self) -> list[ShareGroup]:
        """Groups this sidecar answers ListGroups for: those it coordinates and unheld
        ones whose preferred coordinator it is (as for classic groups)."""
        out = dict(self.groups)
        cluster = self.broker.cluster
        for group_id in await self.store.all_ids():
            if group_id in out or cluster.preferred(group_id).node_id != cluster.node_id:
                continue
            try:
                group = await self.coordinate(group_id, create=False)
            except CoordinatorError:
                continue
            if group is not None:
                out[group_id] = group
        return list(out.values())
