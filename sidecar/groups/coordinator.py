"""The group coordinator: Kafka's classic group protocol (GroupCoordinator.scala) for
the groups whose lease this sidecar holds.

Membership lives in memory here, as in Kafka's coordinator; what must survive goes to
Redis through storage/group_store.py (group metadata at each completed generation,
committed offsets on every commit), fenced by the group's lease. A group is loaded on
its first request after this sidecar claims the lease: members of a stable group keep
their generation and assignment and just carry on heartbeating here.

All state changes happen on the event loop between awaits; a JoinGroup or SyncGroup
that must wait parks a future on its member and is answered when the rebalance
moves on. One ticker enforces session, rebalance and join-delay deadlines."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sidecar.cluster import Cluster
from sidecar.config.settings import Settings
from sidecar.groups import mixed
from sidecar.groups.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    UNREVOKED,
    Assignment,
    CgMember,
    ConsumerGroupState,
)
from sidecar.groups.group_configs import (
    HEARTBEAT,
    SESSION,
    STREAMS_HEARTBEAT,
    STREAMS_SESSION,
    STREAMS_STANDBYS,
    GroupConfigs,
)
from sidecar.groups.state import Group, JoinResult, Member, State, SyncResult
from sidecar.groups.streams_group import (
    SHUTDOWN_APPLICATION,
    STALE_TOPOLOGY,
    UNREVOKED_TASKS,
    StreamsGroupState,
    StreamsMember,
    Tasks,
    Topology,
    configure,
)
from sidecar.storage import resilience
from sidecar.storage.group_store import CommittedOffset, Fenced, GroupStore

log = logging.getLogger("skiff.groups")
R = TypeVar("R")  # a heartbeat result type (CgResult, SgResult)

TICK_SECONDS = 0.1
NEW_MEMBER_JOIN_TIMEOUT_S = 300.0  # Kafka's NewMemberJoinTimeoutMs


class CoordinatorError(Exception):
    """The request cannot be served here; .code is the Kafka error name."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(slots=True)
class JoinRequest:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool
    supports_skip_assignment: bool
    # Partition counts of existing topics, for a classic member of a consumer group.
    partition_counts: Callable[[set[str]], Awaitable[dict[str, int]]] | None = None


@dataclass(slots=True)
class CgHeartbeat:
    """A ConsumerGroupHeartbeat; None fields did not change since the last one."""

    member_id: str
    epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    topics: list[str] | None
    assignor: str | None
    owned: set[tuple[str, int]] | None
    client_id: str
    client_host: str
    regex: str | None = None  # "" drops the member's regex


@dataclass(slots=True)
class SgHeartbeat:
    """A StreamsGroupHeartbeat; None fields did not change since the last one."""

    member_id: str
    epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    topology: Topology | None
    owned: set[tuple[str, int]] | None  # active tasks
    process_id: str | None
    endpoint: tuple[str, int] | None
    client_tags: dict[str, str] | None
    endpoint_epoch: int
    client_id: str
    client_host: str
    shutdown: bool = False  # ShutdownApplication


@dataclass(slots=True)
class SgResult:
    error: str
    message: str | None = None
    member_id: str = ""
    epoch: int = 0
    active: Tasks | None = None  # None: not sent (unchanged)
    standby: Tasks | None = None
    status: list[tuple[int, str]] | None = None
    to_create: dict[str, tuple[int, dict[str, str]]] | None = None
    endpoint_epoch: int = 0
    # (endpoint, active tasks, standby tasks) per member with an endpoint; None: unchanged
    endpoints: list[tuple[tuple[str, int], Tasks, Tasks]] | None = None
    topology: Topology | None = None


@dataclass(slots=True)
class CgResult:
    error: str
    message: str | None = None
    member_id: str | None = None
    epoch: int = 0
    assignment: Assignment | None = None  # None: not sent (unchanged)


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    def __init__(self, settings: Settings, store: GroupStore, cluster: Cluster) -> None:
        self.settings = settings
        self.store = store
        self.cluster = cluster
        # consumer.session.timeout.ms and consumer.heartbeat.interval.ms per group
        self.configs = GroupConfigs(
            store.redis,
            {
                SESSION: settings.group_consumer_session_timeout_ms,
                HEARTBEAT: settings.group_consumer_heartbeat_interval_ms,
            },
        )
        self.groups: dict[str, Group] = {}
        self._loading: dict[str, asyncio.Lock] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self.closing = False  # shutting down: this sidecar coordinates no group any more
        cluster.on_lost(self._drop_all)

    def streams_config(self, group_id: str, name: str) -> int:
        """A streams group's streams.* group config; server defaults: the consumer
        session and heartbeat flags (Skiff has no group.streams.* ones) and
        --group-streams-num-standby-replicas."""
        default = {
            STREAMS_SESSION: self.configs.defaults[SESSION],
            STREAMS_HEARTBEAT: self.configs.defaults[HEARTBEAT],
            STREAMS_STANDBYS: self.settings.group_streams_num_standby_replicas,
        }[name]
        return self.configs.get(group_id, name, default)

    @property
    def loop_time(self) -> float:
        return asyncio.get_running_loop().time()

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._ticker()),
            asyncio.create_task(self._sweeper()),
        ]

    async def stop(self) -> None:
        """Hand every group back: release the leases so another sidecar takes over at
        once instead of after the registration expires. Parked JoinGroup and SyncGroup
        requests are answered NOT_COORDINATOR, so their members go elsewhere."""
        self.closing = True
        for task in self._tasks:
            task.cancel()
        held = list(self.groups)
        for group_id in held:
            self._drop(group_id)

        async def release(group_id: str) -> None:
            try:
                await self.store.release(group_id, self.cluster.token)
            except Exception as exc:
                log.warning("could not release group %r: %s", group_id, exc)

        await asyncio.gather(*(release(g) for g in held))

    # -- ownership ----------------------------------------------------------------

    async def coordinate(self, group_id: str, create: bool) -> Group | None:
        """The group, loaded, if this sidecar coordinates it. None when the group does
        not exist and `create` is false. Raises NOT_COORDINATOR when a live sidecar
        holds the lease, COORDINATOR_NOT_AVAILABLE while this one is not registered."""
        if self.closing:
            raise CoordinatorError("NOT_COORDINATOR")
        if not self.cluster.owns_leases() and not await self.cluster.wait_owns_leases(
            resilience.remaining()
        ):
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
                token = self.cluster.token
                holder = await self.store.lease_holder(group_id)
                if holder != token:
                    if holder is not None and await self.cluster.live_holder(holder):
                        raise CoordinatorError("NOT_COORDINATOR")
                    if not create and not await self.store.exists(group_id):
                        return None
                    if not await self.store.claim(group_id, token, holder):
                        raise CoordinatorError("NOT_COORDINATOR")
                    if holder is not None:
                        log.info("took over group %r from %s", group_id, holder)
                raw = await self.store.load(group_id)
                if token != self.cluster.token or not self.cluster.owns_leases():
                    raise CoordinatorError("NOT_COORDINATOR")
                group = Group.from_json(
                    group_id, raw, self.loop_time, self.configs.get(group_id, SESSION)
                )
                self.groups[group_id] = group
                return group
        finally:
            if not lock.locked() and self._loading.get(group_id) is lock:
                del self._loading[group_id]

    def _drop(self, group_id: str) -> None:
        """Forget a group whose lease is gone; parked requests go elsewhere."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        for m in group.members.values():
            m.answer_join(JoinResult("NOT_COORDINATOR", m.member_id))
            m.answer_sync(SyncResult("NOT_COORDINATOR"))

    def _drop_all(self) -> None:
        if self.groups:
            log.warning("lost the broker registration: dropping %d group(s)", len(self.groups))
        for group_id in list(self.groups):
            self._drop(group_id)

    async def _persist(self, group: Group, assignments: dict[str, bytes] | None = None) -> bool:
        try:
            await self.store.store(group.group_id, self.cluster.token, group.to_json(assignments))
            return True
        except Fenced:
            log.warning("group %r was taken over by another sidecar", group.group_id)
            self._drop(group.group_id)
            return False

    def _spawn_persist(self, group: Group) -> None:
        async def run() -> None:
            try:
                # Not bound by the request that started it: the task outlives it.
                with resilience.request_deadline(None):
                    await self._persist(group)
            except Exception as exc:
                log.warning("could not store group %r: %s", group.group_id, exc)

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- JoinGroup ------------------------------------------------------------------

    async def join(self, group_id: str, req: JoinRequest) -> JoinResult:
        group = await self.coordinate(group_id, create=req.member_id == "")
        if group is None:
            return JoinResult("UNKNOWN_MEMBER_ID", req.member_id)
        if group.state == State.DEAD:
            return JoinResult("COORDINATOR_NOT_AVAILABLE", req.member_id)
        if group.consumer is not None:
            if group.consumer.members:
                return await mixed.join(self, group, req)
            group.consumer = None  # an empty consumer group becomes a classic one
            group.protocol_type = None
        if group.streams is not None:
            if group.streams.members:
                return JoinResult("INCONSISTENT_GROUP_PROTOCOL", req.member_id)
            group.streams = None  # an empty streams group becomes a classic one
            group.protocol_type = None
        if not group.supports(req.protocol_type, req.protocols, req.member_id):
            return JoinResult("INCONSISTENT_GROUP_PROTOCOL", req.member_id)
        if req.member_id == "":
            # Kafka names static members after their instance id, others after the client.
            new_id = f"{req.instance_id or req.client_id}-{uuid.uuid4()}"
            if req.instance_id is not None:
                return await self._static_join(group, new_id, req)
            if req.require_known_member_id:
                # KIP-394: hand out the id first, count the member once it rejoins with it.
                group.pending[new_id] = self.loop_time + req.session_timeout_ms / 1000
                return JoinResult("MEMBER_ID_REQUIRED", new_id)
            return await self._add_and_wait(group, new_id, req)
        if req.member_id in group.pending:
            del group.pending[req.member_id]
            return await self._add_and_wait(group, req.member_id, req)
        if group.fenced(req.instance_id, req.member_id):
            return JoinResult("FENCED_INSTANCE_ID", req.member_id)
        if req.member_id not in group.members or (
            req.instance_id is not None and req.instance_id not in group.static
        ):
            return JoinResult("UNKNOWN_MEMBER_ID", req.member_id)
        member = group.members[req.member_id]
        if group.state == State.PREPARING:
            return await self._update_and_wait(group, member, req)
        if group.state == State.COMPLETING:
            if member.matches(req.protocols):
                # A lost JoinGroup answer: give the current generation again.
                return self._join_result(group, member)
            return await self._update_and_wait(group, member, req)
        if group.state == State.STABLE:
            if group.leader == member.member_id or not member.matches(req.protocols):
                return await self._update_and_wait(group, member, req)
            # A follower with unchanged metadata: the current generation, then SyncGroup.
            return self._join_result(group, member)
        return JoinResult("UNKNOWN_MEMBER_ID", req.member_id)

    def _join_result(self, group: Group, member: Member, skip: bool = False) -> JoinResult:
        is_leader = group.leader == member.member_id
        return JoinResult(
            "NONE",
            member.member_id,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader or "",
            group.leader_members() if is_leader else [],
            skip,
        )

    def _park_join(self, member: Member) -> asyncio.Future[JoinResult]:
        """Park the member's JoinGroup; the future is answered when the rebalance
        completes, which may happen before the caller awaits it."""
        if member.join_waiter is not None:
            # A second JoinGroup from the same member replaces the first.
            member.answer_join(JoinResult("REBALANCE_IN_PROGRESS", member.member_id))
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        member.join_waiter = waiter
        return waiter

    async def _add_and_wait(self, group: Group, member_id: str, req: JoinRequest) -> JoinResult:
        member = Member(
            member_id=member_id,
            instance_id=req.instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            is_new=True,
            deadline=self.loop_time + NEW_MEMBER_JOIN_TIMEOUT_S,
        )
        if group.state == State.PREPARING and group.initial_delay:
            group.new_member_added = True
        group.add(member)
        waiter = self._park_join(member)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")
        self._try_complete_join(group)
        return await waiter

    async def _update_and_wait(self, group: Group, member: Member, req: JoinRequest) -> JoinResult:
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        waiter = self._park_join(member)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self._try_complete_join(group)
        return await waiter

    async def _static_join(self, group: Group, new_id: str, req: JoinRequest) -> JoinResult:
        assert req.instance_id is not None
        old_id = group.static.get(req.instance_id)
        if old_id is None:
            return await self._add_and_wait(group, new_id, req)
        old_leader = group.leader
        member = group.replace_static(req.instance_id, old_id, new_id)
        member.deadline = self.loop_time + req.session_timeout_ms / 1000
        member.protocols = req.protocols
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        if group.state == State.STABLE:
            if group.select_protocol() != group.protocol:
                waiter = self._park_join(member)
                self._prepare_rebalance(group, f"static member {req.instance_id} changed protocols")
                return await waiter
            # Same protocol: no rebalance. Persist the new member id, hand back the
            # current generation; the member gets its old assignment in SyncGroup.
            generation = group.generation
            if not await self._persist(group):
                return JoinResult("NOT_COORDINATOR", new_id)
            if group.generation != generation or new_id not in group.members:
                return JoinResult("REBALANCE_IN_PROGRESS", new_id)
            if req.supports_skip_assignment:
                # JoinGroup v9+ (KIP-814): a rejoining leader learns it leads but
                # must not reassign.
                is_leader = group.leader == new_id
                return JoinResult(
                    "NONE",
                    new_id,
                    group.generation,
                    group.protocol_type,
                    group.protocol,
                    group.leader or "",
                    group.leader_members() if is_leader else [],
                    skip_assignment=is_leader,
                )
            # Older versions: report the old leader id, so that a rejoining leader does
            # not take itself for the leader and reassign in a stable group.
            return JoinResult(
                "NONE",
                new_id,
                group.generation,
                group.protocol_type,
                group.protocol,
                old_leader or "",
            )
        waiter = self._park_join(member)
        if group.state == State.COMPLETING:
            self._prepare_rebalance(group, f"static member {req.instance_id} rejoined")
        self._try_complete_join(group)
        return await waiter

    # -- rebalancing -----------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state in (State.STABLE, State.COMPLETING, State.EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state == State.COMPLETING:
            self._reset_assignments(group, "REBALANCE_IN_PROGRESS")
        group.pending_sync.clear()
        timeout = group.rebalance_timeout_ms()
        if group.state == State.EMPTY:
            delay = self.settings.group_initial_rebalance_delay_ms
            group.initial_delay = True
            group.new_member_added = False
            group.initial_remaining_ms = max(timeout - delay, 0)
            group.join_deadline = self.loop_time + delay / 1000
        else:
            group.initial_delay = False
            group.join_deadline = self.loop_time + timeout / 1000
        log.info(
            "group %r: preparing rebalance (generation %d): %s",
            group.group_id,
            group.generation,
            reason,
        )
        group.state = State.PREPARING
        # Kafka tries to complete at once: a group whose last member left empties now.
        self._try_complete_join(group)

    def _reset_assignments(self, group: Group, error: str) -> None:
        for m in group.members.values():
            m.assignment = b""
            m.answer_sync(SyncResult(error))

    def _try_complete_join(self, group: Group) -> None:
        if group.state == State.PREPARING and not group.initial_delay and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        for m in list(group.members.values()):
            if not m.joining and m.instance_id is None:
                log.info("group %r: member %s did not rejoin; removed", group.group_id, m.member_id)
                group.remove(m.member_id)
        if group.members and not self._elect_joined_leader(group):
            # Nobody rejoined yet: wait another rebalance timeout for sessions to expire.
            group.join_deadline = self.loop_time + group.rebalance_timeout_ms() / 1000
            return
        group.generation += 1
        group.pending_sync.clear()
        group.legacy_epochs.clear()
        if not group.members:
            group.protocol = None
            group.state = State.EMPTY
            group.state_ms = _now_ms()
            log.info("group %r is empty at generation %d", group.group_id, group.generation)
            self._spawn_persist(group)
            return
        group.protocol = group.select_protocol()
        group.state = State.COMPLETING
        now = self.loop_time
        for m in group.members.values():
            m.answer_join(self._join_result(group, m))
            m.deadline = now + m.session_timeout_ms / 1000
            m.is_new = False
            group.pending_sync.add(m.member_id)
        group.sync_deadline = now + group.rebalance_timeout_ms() / 1000
        log.info(
            "group %r: generation %d with %d member(s), protocol %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol,
        )

    def _elect_joined_leader(self, group: Group) -> bool:
        leader = group.members.get(group.leader or "")
        if leader is not None and leader.joining:
            return True
        for m in group.members.values():
            if m.joining:
                group.leader = m.member_id
                return True
        return False

    def _remove_and_update(self, group: Group, member: Member, reason: str) -> None:
        member.answer_join(JoinResult("UNKNOWN_MEMBER_ID", member.member_id))
        member.answer_sync(SyncResult("UNKNOWN_MEMBER_ID"))
        group.remove(member.member_id)
        if group.state in (State.STABLE, State.COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.state == State.PREPARING:
            self._try_complete_join(group)

    # -- SyncGroup ---------------------------------------------------------------------

    async def sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        group = await self.coordinate(group_id, create=False)
        if group is None:
            return SyncResult("UNKNOWN_MEMBER_ID")
        if group.state == State.DEAD:
            return SyncResult("COORDINATOR_NOT_AVAILABLE")
        if group.consumer is not None and group.consumer.members:
            return await mixed.sync(self, group, member_id, generation, protocol_type, protocol)
        if group.fenced(instance_id, member_id):
            return SyncResult("FENCED_INSTANCE_ID")
        if member_id not in group.members:
            return SyncResult("UNKNOWN_MEMBER_ID")
        if generation != group.generation:
            return SyncResult("ILLEGAL_GENERATION")
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol is not None and protocol != group.protocol
        ):
            return SyncResult("INCONSISTENT_GROUP_PROTOCOL")
        member = group.members[member_id]
        if group.state == State.EMPTY:
            return SyncResult("UNKNOWN_MEMBER_ID")
        if group.state == State.PREPARING:
            return SyncResult("REBALANCE_IN_PROGRESS")
        if group.state == State.STABLE:
            group.pending_sync.discard(member_id)
            member.deadline = self.loop_time + member.session_timeout_ms / 1000
            return SyncResult("NONE", group.protocol_type, group.protocol, member.assignment)
        # CompletingRebalance: wait for the leader's assignment.
        if member.sync_waiter is not None:
            member.answer_sync(SyncResult("REBALANCE_IN_PROGRESS"))
        member.sync_waiter = asyncio.get_running_loop().create_future()
        waiter = member.sync_waiter
        group.pending_sync.discard(member_id)
        if group.leader == member_id:
            full = {m: assignments.get(m, b"") for m in group.members}
            if await self._persist(group, full):
                if group.state == State.COMPLETING and group.generation == generation:
                    for m in group.members.values():
                        m.assignment = full.get(m.member_id, b"")
                        m.answer_sync(
                            SyncResult("NONE", group.protocol_type, group.protocol, m.assignment)
                        )
                    group.state = State.STABLE
                    log.info("group %r is stable at generation %d", group.group_id, generation)
        return await waiter

    # -- Heartbeat and LeaveGroup ----------------------------------------------------------

    async def heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int
    ) -> str:
        group = await self.coordinate(group_id, create=False)
        if group is None:
            return "UNKNOWN_MEMBER_ID"
        if group.state == State.DEAD:
            return "COORDINATOR_NOT_AVAILABLE"
        if group.consumer is not None and group.consumer.members:
            return mixed.heartbeat(self, group, member_id, generation)
        error = group.validate_member(member_id, instance_id)
        if error:
            return error
        if group.state == State.EMPTY:
            return "UNKNOWN_MEMBER_ID"
        if generation != group.generation and group.legacy_epochs.get(member_id) != generation:
            return "ILLEGAL_GENERATION"
        member = group.members[member_id]
        member.deadline = self.loop_time + member.session_timeout_ms / 1000
        return "REBALANCE_IN_PROGRESS" if group.state == State.PREPARING else "NONE"

    async def leave(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[str, list[str]]:
        """(top-level error, one error per (member id, instance id))."""
        group = await self.coordinate(group_id, create=False)
        if group is None:
            return "NONE", ["UNKNOWN_MEMBER_ID"] * len(leaving)
        if group.state == State.DEAD:
            return "COORDINATOR_NOT_AVAILABLE", []
        if group.consumer is not None:
            return await self._classic_leave_consumer_group(group, group.consumer, leaving)
        errors = []
        for member_id, instance_id in leaving:
            if member_id == "":
                current = group.static.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append("UNKNOWN_MEMBER_ID")
                    continue
                member_id = current
            elif member_id in group.pending:
                del group.pending[member_id]
                self._try_complete_join(group)
                errors.append("NONE")
                continue
            elif group.fenced(instance_id, member_id):
                errors.append("FENCED_INSTANCE_ID")
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append("UNKNOWN_MEMBER_ID")
                continue
            log.info("group %r: member %s left", group_id, member_id)
            self._remove_and_update(group, member, f"member {member_id} left")
            errors.append("NONE")
        return "NONE", errors

    async def _classic_leave_consumer_group(
        self, group: Group, cg: ConsumerGroupState, leaving: list[tuple[str, str | None]]
    ) -> tuple[str, list[str]]:
        """LeaveGroup of classic members of a consumer group (mixed groups)."""
        errors = []
        for member_id, instance_id in leaving:
            if member_id == "" and instance_id is not None:
                member_id = cg.static.get(instance_id, "")
            member = cg.members.get(member_id)
            if member is None or member.classic is None:
                errors.append("UNKNOWN_MEMBER_ID")
                continue
            self._consumer_remove(group, cg, member_id, "left")
            errors.append("NONE")
        if "NONE" in errors and not await self._persist(group):
            return "NOT_COORDINATOR", []
        return "NONE", errors

    # -- ConsumerGroupHeartbeat (KIP-848) --------------------------------------------------

    async def consumer_heartbeat(
        self,
        group_id: str,
        req: CgHeartbeat,
        partition_counts: Callable[[set[str]], Awaitable[dict[str, int]]],
        resolve: Callable[[str], Awaitable[list[str]]] | None = None,
    ) -> CgResult:
        """One ConsumerGroupHeartbeat (GroupMetadataManager.consumerGroupHeartbeat), the
        request already validated. `partition_counts(topics)`: the existing ones' counts;
        `resolve(regex)`: the topic names a SubscribedTopicRegex matches, sorted."""
        group = await self.coordinate(group_id, create=req.epoch == 0)
        wanted = set(req.topics or ())
        known = None
        if group is not None:
            wanted |= group.subscribed_topics() or set()
            if group.consumer is not None:
                known = group.consumer.members.get(req.member_id)
        # A regex is resolved when it is new and then at most once a second, so topics
        # created or deleted later reach the assignment within a heartbeat or two.
        regex = req.regex if req.regex is not None else (known.regex if known else None)
        matched: list[str] | None = None
        if regex and resolve is not None:
            if known is None or known.regex != regex or self.loop_time - known.resolved_at >= 1.0:
                matched = await resolve(regex)
                wanted |= set(matched)
        # Read before any change: the group must not move between its steps.
        topic_partitions = await partition_counts(wanted)
        if group is None or (group.consumer is None and req.epoch != 0):
            return CgResult(
                "UNKNOWN_MEMBER_ID", f"Member {req.member_id} is not a member of group {group_id}."
            )
        if group.state == State.DEAD:
            return CgResult("COORDINATOR_NOT_AVAILABLE")
        if group.streams is not None:
            if group.streams.members:
                return CgResult("GROUP_ID_NOT_FOUND", f"Group {group_id} is not a consumer group.")
            group.streams = None
        if group.consumer is None:
            if group.members or group.pending:
                refusal = mixed.upgrade_refusal(
                    group, self.settings.group_consumer_migration_policy
                )
                if refusal is not None:
                    return CgResult("GROUP_ID_NOT_FOUND", refusal)
                log.info("group %r: upgraded from classic to consumer", group_id)
                mixed.upgrade(group, self.loop_time)
            else:
                group.consumer = ConsumerGroupState()
                group.protocol_type, group.protocol, group.leader = "consumer", None, None
        cg = group.consumer
        now = self.loop_time
        session_s = self.configs.get(group_id, SESSION) / 1000
        if req.epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return await self._member_leave(
                group,
                cg.members,
                req,
                lambda m: self._consumer_remove(group, cg, m, "left"),
                CgResult,
            )
        member = cg.members.get(req.member_id)
        changed = bump = False  # bump: a new group epoch, once per heartbeat as in Kafka
        if req.epoch == 0:
            if req.instance_id is not None:
                old_id = cg.static.get(req.instance_id)
                old = cg.members.get(old_id) if old_id is not None else None
                if old is not None and old.member_id != req.member_id:
                    if old.epoch != STATIC_LEAVE_EPOCH:
                        return CgResult(
                            "UNRELEASED_INSTANCE_ID",
                            f"Static member {req.instance_id} has not released its assignment.",
                        )
                    # A static member back under a new id takes over the old one's place.
                    target = cg.target.pop(old.member_id, {})  # before remove() drops it
                    cg.remove(old.member_id)
                    old.member_id = req.member_id
                    old.epoch = old.previous_epoch
                    cg.add(old)
                    cg.target[req.member_id] = target
                    member = old
                    changed = True
            if member is None:
                member = CgMember(req.member_id, req.instance_id)
                cg.add(member)
                bump = True
        elif member is None:
            return CgResult(
                "UNKNOWN_MEMBER_ID", f"Member {req.member_id} is not a member of group {group_id}."
            )
        elif req.epoch != member.epoch and not (
            req.epoch == member.previous_epoch
            and req.owned is not None
            and req.owned <= {(t, p) for t, ps in member.assigned.items() for p in ps}
        ):
            # Kafka lets a member one epoch behind (a lost answer) carry on.
            which = "larger" if req.epoch > member.epoch else "smaller"
            return CgResult(
                "FENCED_MEMBER_EPOCH",
                f"The consumer group member has a {which}"
                f" member epoch ({req.epoch}) than the one known by the group coordinator"
                f" ({member.epoch}).",
            )
        member.deadline = now + session_s
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.assignor is not None and req.assignor != member.assignor:
            member.assignor = req.assignor
            bump = True
        if req.topics is not None and sorted(req.topics) != sorted(member.topics):
            member.topics = sorted(set(req.topics))
            bump = True
        if req.regex is not None and (req.regex or None) != member.regex:
            member.regex = req.regex or None
            member.matched = []
            bump = True
        if member.regex is not None and matched is not None:
            member.resolved_at = now
            if matched != member.matched:
                member.matched = matched
                bump = True
        metadata = {t: n for t, n in topic_partitions.items() if t in cg.subscribed()}
        if metadata != cg.partitions:
            cg.partitions = metadata
            bump = True
        if bump:
            cg.epoch += 1
            changed = True
        if cg.epoch > cg.assignment_epoch:
            cg.compute_target()
        before = dict(member.assigned)
        if cg.reconcile(member, req.owned, now):
            changed = True
        if changed:
            if group.state == State.EMPTY:
                group.state = State.STABLE
            if not await self._persist(group):
                return CgResult("NOT_COORDINATOR")
        send = req.epoch == 0 or req.owned is not None or member.assigned != before
        return CgResult(
            "NONE", None, member.member_id, member.epoch, member.assigned if send else None
        )

    async def _member_leave(
        self,
        group: Group,
        members: dict[str, Any],
        req: CgHeartbeat | SgHeartbeat,
        remove: Callable[[str], None],
        result: Callable[..., R],
    ) -> R:
        """A consumer or streams member's leave heartbeat (epoch -1, or -2 for a static
        member stepping out)."""
        member = members.get(req.member_id)
        if member is None:
            return result(
                "UNKNOWN_MEMBER_ID",
                f"Member {req.member_id} is not a member of group {group.group_id}.",
            )
        if req.epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # A static member leaving for a while keeps its assignment until its
            # session expires or it comes back.
            if member.epoch != STATIC_LEAVE_EPOCH:
                member.previous_epoch = member.epoch
            member.epoch = STATIC_LEAVE_EPOCH
        else:
            remove(member.member_id)
        if not await self._persist(group):
            return result("NOT_COORDINATOR")
        return result("NONE", None, req.member_id, req.epoch)

    def _consumer_remove(
        self, group: Group, cg: ConsumerGroupState, member_id: str, why: str
    ) -> None:
        """A member gone (left, session expired, never revoked): a new target for the rest;
        its partitions become free for their new owners' next heartbeats."""
        gone = cg.remove(member_id)
        cg.epoch += 1
        log.info("consumer group %r: member %s %s", group.group_id, member_id, why)
        cg.partitions = {t: n for t, n in cg.partitions.items() if t in cg.subscribed()}
        cg.compute_target()
        if not cg.members:
            group.state = State.EMPTY
            group.state_ms = _now_ms()
        elif (
            gone is not None
            and gone.classic is None
            and mixed.maybe_downgrade(
                group, self.settings.group_consumer_migration_policy, self.loop_time
            )
        ):
            log.info("group %r: downgraded from consumer to classic", group.group_id)
            self._prepare_rebalance(group, "downgraded to a classic group")

    def _tick_consumer(self, group: Group, cg: ConsumerGroupState, now: float) -> None:
        gone = False
        for member in list(cg.members.values()):
            if group.consumer is not cg:
                break  # downgraded to a classic group
            if member.deadline <= now:
                self._consumer_remove(group, cg, member.member_id, "session expired")
                gone = True
            elif member.state == UNREVOKED and member.revoke_deadline <= now:
                # Kafka fences a member that keeps revoked partitions past its rebalance
                # timeout.
                self._consumer_remove(group, cg, member.member_id, "did not revoke in time")
                gone = True
        if gone:
            self._spawn_persist(group)

    # -- StreamsGroupHeartbeat (KIP-1071) --------------------------------------------------

    async def streams_heartbeat(
        self,
        group_id: str,
        req: SgHeartbeat,
        partition_counts: Callable[[set[str]], Awaitable[dict[str, int]]],
    ) -> SgResult:
        """One StreamsGroupHeartbeat (GroupMetadataManager.streamsGroupHeartbeat), the
        request already validated. `partition_counts(topics)`: the existing ones' counts.
        The answer names the internal topics the caller must create (Kafka's broker
        creates them after the coordinator answers MISSING_INTERNAL_TOPICS)."""
        group = await self.coordinate(group_id, create=req.epoch == 0)
        known = group.streams.topology if group is not None and group.streams else None
        topology = known or req.topology
        # Read before any change: the group must not move between its steps.
        counts = await partition_counts(topology.topics()) if topology is not None else {}
        if group is None or (group.streams is None and req.epoch != 0):
            return SgResult("GROUP_ID_NOT_FOUND", f"Streams group {group_id} not found.")
        if group.state == State.DEAD:
            return SgResult("COORDINATOR_NOT_AVAILABLE")
        if group.streams is None:
            # Kafka 4.4 converts an empty classic group only; a consumer group, even
            # empty, is refused.
            if group.members or group.pending or group.consumer is not None:
                return SgResult("GROUP_ID_NOT_FOUND", f"Group {group_id} is not a streams group.")
            group.consumer = None
            group.streams = StreamsGroupState()
            group.protocol_type, group.protocol, group.leader = "streams", None, None
        sg = group.streams
        now = self.loop_time
        if req.epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return await self._member_leave(
                group,
                sg.members,
                req,
                lambda m: self._streams_remove(group, sg, m, "left"),
                SgResult,
            )
        member = sg.members.get(req.member_id)
        changed = bump = False
        status: list[tuple[int, str]] = []
        if req.epoch == 0:
            if req.instance_id is not None:
                old_id = sg.static.get(req.instance_id)
                old = sg.members.get(old_id) if old_id is not None else None
                if old is not None and old.member_id != req.member_id:
                    if old.epoch != STATIC_LEAVE_EPOCH:
                        return SgResult(
                            "UNRELEASED_INSTANCE_ID",
                            f"Static member {req.instance_id} has not released its assignment.",
                        )
                    # Its place, epoch and tasks (current and target) carry over.
                    target = sg.target.get(old.member_id, {})
                    standby = sg.target_standby.get(old.member_id, {})
                    sg.remove(old.member_id)
                    old.member_id = req.member_id
                    old.epoch = old.previous_epoch
                    sg.add(old)
                    sg.target[req.member_id] = target
                    sg.target_standby[req.member_id] = standby
                    member = old
                    changed = True
            if member is None:
                member = StreamsMember(req.member_id, req.instance_id)
                sg.add(member)
                bump = True
            if req.topology is not None:
                member.topology_epoch = req.topology.epoch
                others = [m for m in sg.members.values() if m.member_id != member.member_id]
                if sg.topology is None or (not others and req.topology != sg.topology):
                    sg.topology = req.topology
                    bump = True
                elif req.topology.epoch < sg.topology.epoch:
                    status.append(
                        (
                            STALE_TOPOLOGY,
                            f"The member's topology epoch {req.topology.epoch} is behind the "
                            f"group's topology epoch {sg.topology.epoch}.",
                        )
                    )
                elif req.topology.epoch > sg.topology.epoch:
                    return SgResult("INVALID_REQUEST", "Topology updates are not supported yet.")
        elif member is None:
            return SgResult(
                "UNKNOWN_MEMBER_ID", f"Member {req.member_id} is not a member of group {group_id}."
            )
        elif req.epoch != member.epoch and not (
            req.epoch == member.previous_epoch
            and req.owned is not None
            and req.owned <= {(s, p) for s, ps in member.assigned.items() for p in ps}
        ):
            which = "greater" if req.epoch > member.epoch else "smaller"
            return SgResult(
                "FENCED_MEMBER_EPOCH",
                f"The streams group member has a {which}"
                f" member epoch ({req.epoch}) than the one known by the group coordinator"
                f" ({member.epoch}). The member must abandon all its partitions and rejoin.",
            )
        member.deadline = now + self.streams_config(group_id, STREAMS_SESSION) / 1000
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms >= 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.process_id is not None and req.process_id != member.process_id:
            member.process_id = req.process_id
            changed = True
        if req.endpoint is not None and req.endpoint != member.endpoint:
            member.endpoint = req.endpoint
            sg.endpoints_changed()
            changed = True
        if req.client_tags is not None and req.client_tags != member.client_tags:
            member.client_tags = req.client_tags
            changed = True
        if req.shutdown and sg.shutdown_member is None:
            log.info("streams group %r: member %s requested a shutdown", group_id, member.member_id)
            sg.shutdown_member = member.member_id
            changed = True
        if sg.shutdown_member is not None:
            status.append(
                (
                    SHUTDOWN_APPLICATION,
                    f"Streams group member {sg.shutdown_member} encountered a fatal error and "
                    "requested a shutdown for the entire application.",
                )
            )
        to_create: dict[str, tuple[int, dict[str, str]]] = {}
        if sg.topology is not None:
            configured = configure(sg.topology, counts)
            status.extend(configured.status)
            to_create = configured.to_create
            if configured.tasks != sg.tasks:
                sg.tasks = configured.tasks
                bump = True
            sg.partitions = counts
        if bump:
            sg.epoch += 1
            changed = True
        if sg.epoch > sg.assignment_epoch:
            sg.compute_target(self.streams_config(group.group_id, STREAMS_STANDBYS))
        before = (dict(member.assigned), dict(member.standby))
        if sg.reconcile(member, req.owned, now):
            changed = True
        if changed:
            if group.state == State.EMPTY:
                group.state = State.STABLE
            if not await self._persist(group):
                return SgResult("NOT_COORDINATOR")
        # Kafka sends the tasks on a join, on a full request (one that repeats the
        # rebalance timeout and the owned tasks, as a client does after an error) and
        # when they changed; null otherwise.
        full = req.rebalance_timeout_ms != -1 and req.owned is not None
        send = req.epoch == 0 or full or (member.assigned, member.standby) != before
        endpoints = None
        if req.endpoint_epoch < sg.endpoint_epoch:
            endpoints = [
                (m.endpoint, m.assigned, m.standby)
                for m in sg.members.values()
                if m.endpoint is not None
            ]
        return SgResult(
            "NONE",
            None,
            member.member_id,
            member.epoch,
            member.assigned if send else None,
            member.standby if send else None,
            status,
            to_create,
            sg.endpoint_epoch,
            endpoints,
            sg.topology,
        )

    def _streams_remove(
        self, group: Group, sg: StreamsGroupState, member_id: str, why: str
    ) -> None:
        sg.remove(member_id)
        sg.epoch += 1
        log.info("streams group %r: member %s %s", group.group_id, member_id, why)
        sg.compute_target(self.streams_config(group.group_id, STREAMS_STANDBYS))
        if not sg.members:
            group.state = State.EMPTY
            group.state_ms = _now_ms()
            sg.shutdown_member = None  # Kafka clears the request once the group is empty

    def _tick_streams(self, group: Group, sg: StreamsGroupState, now: float) -> None:
        gone = False
        for member in list(sg.members.values()):
            if member.deadline <= now:
                self._streams_remove(group, sg, member.member_id, "session expired")
                gone = True
            elif member.state == UNREVOKED_TASKS and member.revoke_deadline <= now:
                self._streams_remove(group, sg, member.member_id, "did not revoke in time")
                gone = True
        if gone:
            self._spawn_persist(group)

    # -- offsets -------------------------------------------------------------------------

    async def commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[tuple[str, int], CommittedOffset],
        version: int = 9,
    ) -> str:
        """Commit offsets; the error for every partition of the request ("NONE")."""
        group = await self.coordinate(group_id, create=generation < 0)
        if group is None:
            # A generation for a group that does not exist: Kafka 4's
            # OffsetMetadataManager says GROUP_ID_NOT_FOUND from v9 (KIP-848).
            return "GROUP_ID_NOT_FOUND" if version >= 9 else "ILLEGAL_GENERATION"
        if group.state == State.DEAD:
            return "COORDINATOR_NOT_AVAILABLE"
        member = None
        cg = group.consumer
        sg = group.streams
        if sg is not None and (generation >= 0 or sg.members):
            # StreamsGroup.validateOffsetCommit: a member at its current epoch.
            sg_member = sg.members.get(member_id)
            if sg_member is None:
                return "UNKNOWN_MEMBER_ID"
            if version < 9:
                return "UNSUPPORTED_VERSION"
            if generation != sg_member.epoch:
                return "STALE_MEMBER_EPOCH"
        elif cg is not None and (generation >= 0 or cg.members):
            # ConsumerGroup.validateOffsetCommit: a member at its current epoch, v9+.
            cg_member = cg.members.get(member_id)
            if cg_member is None:
                return "UNKNOWN_MEMBER_ID"
            if cg_member.classic is not None:
                # A classic member commits at its generation, any version (Kafka).
                if generation != cg_member.epoch:
                    return "ILLEGAL_GENERATION"
            elif version < 9:
                return "UNSUPPORTED_VERSION"
            if generation != cg_member.epoch:
                return "STALE_MEMBER_EPOCH"
        elif generation < 0 and group.state == State.EMPTY:
            pass  # a standalone commit: the group only stores offsets
        elif generation >= 0 or member_id != "" or instance_id is not None:
            error = _classic_member_error(group, generation, member_id, instance_id)
            if error:
                return error
            if group.state == State.COMPLETING:
                return "REBALANCE_IN_PROGRESS"
            member = group.members[member_id]
        else:
            return "UNKNOWN_MEMBER_ID"
        if member is not None:
            member.deadline = self.loop_time + member.session_timeout_ms / 1000
        if not offsets:
            return "NONE"
        try:
            await self.store.commit(group_id, self.cluster.token, offsets)
        except Fenced:
            self._drop(group_id)
            return "NOT_COORDINATOR"
        return "NONE"

    async def validate_txn_commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        precise_errors: bool = False,
    ) -> str:
        """TxnOffsetCommit's group checks (KIP-447, Kafka's validateOffsetCommit with
        isTransactional): a zombie member of an older generation is fenced with
        ILLEGAL_GENERATION. Without generation, member and instance id (v0-v2, or a
        producer given only the group id) any classic group accepts; an unknown group
        is created as a simple group when the generation is -1. precise_errors (v6+,
        KIP-1319): an unknown group is GROUP_ID_NOT_FOUND and a consumer group member's
        old epoch STALE_MEMBER_EPOCH, where older versions get ILLEGAL_GENERATION."""
        group = await self.coordinate(group_id, create=generation < 0)
        if group is None:
            return "GROUP_ID_NOT_FOUND" if precise_errors else "ILLEGAL_GENERATION"
        if group.state == State.DEAD:
            return "COORDINATOR_NOT_AVAILABLE"
        cg = group.consumer or group.streams
        if cg is not None and (generation >= 0 or cg.members):
            cg_member = cg.members.get(member_id)
            if cg_member is None:
                return "UNKNOWN_MEMBER_ID"
            if generation == cg_member.epoch:
                return "NONE"
            # Kafka's StaleMemberEpochException, ILLEGAL_GENERATION before v6.
            return "STALE_MEMBER_EPOCH" if precise_errors else "ILLEGAL_GENERATION"
        if generation < 0 and group.state == State.EMPTY:
            return "NONE"
        if generation >= 0 or member_id != "" or instance_id is not None:
            return _classic_member_error(group, generation, member_id, instance_id) or "NONE"
        return "NONE"

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> dict[tuple[str, int], CommittedOffset] | None:
        """Committed offsets (all when partitions is None); None if the group is
        unknown. As in Kafka, expired offsets stay visible until the expiry sweep.
        A consumer group's member (OffsetFetch v9) must be at its current epoch."""
        group = await self.coordinate(group_id, create=False)
        if group is None:
            return None
        kip848 = group.consumer or group.streams
        if kip848 is not None and (member_id is not None or member_epoch >= 0):
            cg_member = kip848.members.get(member_id or "")
            if cg_member is None:
                raise CoordinatorError("UNKNOWN_MEMBER_ID")
            if member_epoch != cg_member.epoch:
                raise CoordinatorError("STALE_MEMBER_EPOCH")
        if partitions is None:
            return await self.store.offsets(group_id)
        values = await self.store.offsets_of(group_id, partitions)
        return {tp: v for tp, v in zip(partitions, values, strict=True) if v is not None}

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[str, dict[tuple[str, int], str]]:
        """OffsetDelete: (group error, error per partition)."""
        group = await self.coordinate(group_id, create=False)
        if group is None or group.state == State.DEAD:
            return "GROUP_ID_NOT_FOUND", {}
        result: dict[tuple[str, int], str] = {}
        if group.state == State.EMPTY:
            deletable = partitions
        elif group.protocol_type in ("consumer", "streams"):
            # A streams group's topology topics count as subscribed (Kafka's
            # StreamsGroup.isSubscribedToTopic).
            subscribed = group.subscribed_topics() or set()
            deletable = [tp for tp in partitions if tp[0] not in subscribed]
            result.update(
                {tp: "GROUP_SUBSCRIBED_TO_TOPIC" for tp in partitions if tp[0] in subscribed}
            )
        else:
            return "NON_EMPTY_GROUP", {}
        if deletable:
            try:
                await self.store.forget(group_id, self.cluster.token, deletable)
            except Fenced:
                self._drop(group_id)
                return "NOT_COORDINATOR", {}
        result.update({tp: "NONE" for tp in deletable})
        return "NONE", result

    def _expired(
        self, group: Group, offsets: dict[tuple[str, int], CommittedOffset], now_ms: int
    ) -> set[tuple[str, int]]:
        """Kafka's removeExpiredOffsets: an empty group's offsets expire
        offsets.retention.minutes after it became empty; a stable consumer group's
        offsets of topics it no longer subscribes to, and a standalone group's
        offsets, that long after their commit; v2-v4 commits carry their own expiry."""
        retention_ms = int(self.settings.offsets_retention_minutes * 60_000)
        if group.protocol_type is not None and group.state == State.EMPTY:
            keep: set[str] = set()
            base = group.state_ms
        elif group.protocol_type in ("consumer", "streams") and group.state == State.STABLE:
            topics = group.subscribed_topics()
            if topics is None:
                return set()
            keep, base = topics, -1
        elif group.protocol_type is None:
            keep, base = set(), -1
        else:
            return set()
        out = set()
        for tp, value in offsets.items():
            if tp[0] in keep:
                continue
            if value.expire_ms >= 0:
                if now_ms >= value.expire_ms:
                    out.add(tp)
            elif now_ms - (base if base >= 0 else value.commit_ms) >= retention_ms:
                out.add(tp)
        return out

    # -- admin ---------------------------------------------------------------------------

    async def describe(self, group_id: str) -> Group | None:
        return await self.coordinate(group_id, create=False)

    async def delete_group(self, group_id: str) -> str:
        group = await self.coordinate(group_id, create=False)
        if group is None or group.state == State.DEAD:
            return "GROUP_ID_NOT_FOUND"
        if group.state != State.EMPTY:
            return "NON_EMPTY_GROUP"
        return await self._delete(group)

    async def _delete(self, group: Group) -> str:
        group.state = State.DEAD
        try:
            await self.store.delete(group.group_id, self.cluster.token)
        except Fenced:
            self._drop(group.group_id)
            return "NOT_COORDINATOR"
        self.groups.pop(group.group_id, None)
        log.info("deleted group %r", group.group_id)
        return "NONE"

    async def listed(self) -> list[Group]:
        """The groups this sidecar answers ListGroups for: those it coordinates, and
        those nobody coordinates whose preferred coordinator it is."""
        out = [g for g in self.groups.values() if g.state != State.DEAD]
        for group_id in await self.store.all_group_ids():
            if group_id in self.groups:
                continue
            if self.cluster.preferred(group_id).node_id != self.cluster.node_id:
                continue
            try:
                group = await self.coordinate(group_id, create=False)
            except CoordinatorError:
                continue
            if group is None:
                await self.store.unlist(group_id)
            elif group.state != State.DEAD:
                out.append(group)
        return out

    # -- deadlines -----------------------------------------------------------------------

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            now = self.loop_time
            for group in list(self.groups.values()):
                try:
                    self._tick(group, now)
                except Exception:
                    log.exception("group %r: deadline handling failed", group.group_id)

    def _tick(self, group: Group, now: float) -> None:
        if group.consumer is not None:
            self._tick_consumer(group, group.consumer, now)
        if group.streams is not None:
            self._tick_streams(group, group.streams, now)
        for member in list(group.members.values()):
            if member.deadline <= now and not member.keep_alive():
                log.info(
                    "group %r: member %s session expired; removed", group.group_id, member.member_id
                )
                self._remove_and_update(group, member, f"member {member.member_id} expired")
        for member_id, deadline in list(group.pending.items()):
            if deadline <= now:
                del group.pending[member_id]
                self._try_complete_join(group)
        if group.state == State.PREPARING and group.join_deadline <= now:
            if group.initial_delay and group.new_member_added and group.initial_remaining_ms > 0:
                # Kafka's InitialDelayedJoin: more members came; wait a little longer.
                group.new_member_added = False
                delay = min(
                    self.settings.group_initial_rebalance_delay_ms, group.initial_remaining_ms
                )
                group.initial_remaining_ms -= delay
                group.join_deadline = now + delay / 1000
            else:
                group.initial_delay = False
                self._complete_join(group)
        if (
            group.state in (State.COMPLETING, State.STABLE)
            and group.pending_sync
            and group.sync_deadline <= now
        ):
            for member_id in list(group.pending_sync):
                log.info("group %r: member %s never synced; removed", group.group_id, member_id)
                member = group.members.get(member_id)
                if member is not None:
                    member.answer_join(JoinResult("UNKNOWN_MEMBER_ID", member_id))
                    group.remove(member_id)
            group.pending_sync.clear()
            self._prepare_rebalance(group, "members did not sync in time")

    async def _sweeper(self) -> None:
        interval = self.settings.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_offsets()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("offset expiry sweep failed: %s", exc)

    async def expire_offsets(self) -> None:
        """Remove expired offsets of the groups this sidecar coordinates (or would);
        an empty group left without offsets is deleted, as Kafka does."""
        for group in await self.listed():
            offsets = await self.store.offsets(group.group_id)
            expired = self._expired(group, offsets, _now_ms())
            if expired:
                log.info("group %r: %d committed offset(s) expired", group.group_id, len(expired))
                try:
                    await self.store.forget(
                        group.group_id,
                        self.cluster.token,
                        expired,
                    )
                except Fenced:
                    self._drop(group.group_id)
                    continue
            if group.state == State.EMPTY and len(expired) == len(offsets) and not group.pending:
                await self._delete(group)


def _classic_member_error(
    group: Group, generation: int, member_id: str, instance_id: str | None
) -> str | None:
    """A commit's member checks in a classic group: a known member (Kafka's
    validateCurrentMember) at the group's generation (or its generation before the
    group went mixed, KIP-848)."""
    error = group.validate_member(member_id, instance_id)
    if error:
        return error
    if generation != group.generation and group.legacy_epochs.get(member_id) != generation:
        return "ILLEGAL_GENERATION"
    return None
