"""KIP-848 mixed groups: classic members (JoinGroup/SyncGroup/Heartbeat) inside a
consumer group, and the online conversions between the two kinds, as Kafka's
GroupMetadataManager does them under `group.consumer.migration.policy`.

- Upgrade: the first ConsumerGroupHeartbeat to a non-empty classic group whose members
  use the `consumer` protocol type turns it into a consumer group. Each classic member
  keeps its partitions (from its last assignment) at member epoch = the generation.
- Classic members of a consumer group get their partitions from the broker's assignor:
  a JoinGroup updates the member (subscription and owned partitions from its metadata)
  and reconciles it; SyncGroup hands back its current partitions; Heartbeat answers
  REBALANCE_IN_PROGRESS while the member has partitions to give up or to receive, so
  it rejoins. Its generation is its member epoch.
- Downgrade: when the last consumer-protocol member leaves (or expires) and classic
  members remain, the group becomes classic again, at generation = the group epoch, and
  prepares a rebalance; its members' old epochs stay valid until that rebalance ends.

Everything lives in the group document under the group lease, so a coordinator move
loses nothing (a classic member's protocols and session timeout are stored with it)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sidecar.groups.consumer_group import CgMember, ClassicMeta, ConsumerGroupState
from sidecar.groups.consumer_protocol import (
    CONSUMER,
    encode_assignment,
    parse_assignment,
    parse_subscription,
)
from sidecar.groups.state import Group, JoinResult, Member, State, SyncResult

if TYPE_CHECKING:
    from sidecar.groups.coordinator import GroupCoordinator, JoinRequest

UPGRADE, DOWNGRADE = "upgrade", "downgrade"


def allowed(policy: str, direction: str) -> bool:
    return policy == "bidirectional" or policy == direction


def _assignment(pairs: set[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in sorted(pairs):
        out.setdefault(t, []).append(p)
    return out


def upgrade_refusal(group: Group, policy: str) -> str | None:
    """Why a non-empty classic group cannot become a consumer group (None: it can)."""
    if group.protocol_type != CONSUMER or group.protocol is None:
        return f"Group {group.group_id} is not a consumer group."
    for m in group.members.values():
        if parse_subscription(m.metadata(group.protocol)) is None:
            return f"Group {group.group_id} is not a consumer group."
    if not allowed(policy, UPGRADE):
        return (
            f"Cannot upgrade classic group {group.group_id} to consumer group"
            " because the online upgrade is disabled."
        )
    return None


def upgrade(group: Group, now: float) -> None:
    """Turn a classic group into a consumer group; parked JoinGroup/SyncGroup requests
    are told to rejoin (REBALANCE_IN_PROGRESS)."""
    cg = ConsumerGroupState(group.generation, group.generation)
    for m in group.members.values():
        meta = m.metadata(group.protocol)
        parsed = parse_subscription(meta)
        assert parsed is not None
        topics, owned = parsed
        assigned = parse_assignment(m.assignment) if m.assignment else None
        member = CgMember(
            m.member_id,
            m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            topics=topics,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            epoch=group.generation,
            previous_epoch=group.generation,
            assigned=_assignment(assigned if assigned is not None else owned),
            deadline=now + m.session_timeout_ms / 1000,
            classic=ClassicMeta(m.session_timeout_ms, list(m.protocols)),
        )
        cg.add(member)
        cg.target[member.member_id] = dict(member.assigned)
        m.answer_join(JoinResult("REBALANCE_IN_PROGRESS", m.member_id))
        m.answer_sync(SyncResult("REBALANCE_IN_PROGRESS"))
    group.members.clear()
    group.static.clear()
    group.pending.clear()  # their JoinGroup gets UNKNOWN_MEMBER_ID and starts afresh
    group.pending_sync.clear()
    group.consumer = cg
    group.protocol_type, group.protocol, group.leader = CONSUMER, None, None
    group.state = State.STABLE


def maybe_downgrade(group: Group, policy: str, now: float) -> bool:
    """After a consumer-protocol member left: a group of classic members only becomes
    classic again, preparing a rebalance (the caller starts it). True if it did."""
    cg = group.consumer
    if cg is None or not cg.members or not allowed(policy, DOWNGRADE):
        return False
    if any(m.classic is None for m in cg.members.values()):
        return False
    group.consumer = None
    group.generation = cg.epoch
    group.protocol_type = CONSUMER
    group.members.clear()
    group.static.clear()
    group.legacy_epochs.clear()
    for m in cg.members.values():
        assert m.classic is not None
        member = Member(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=m.classic.session_timeout_ms,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            protocol_type=CONSUMER,
            protocols=list(m.classic.protocols),
            assignment=encode_assignment(m.assigned),
            deadline=now + m.classic.session_timeout_ms / 1000,
        )
        group.add(member)
        group.legacy_epochs[m.member_id] = m.epoch
    group.protocol = group.select_protocol()
    group.state = State.STABLE
    return True


# -- classic requests to a consumer group -------------------------------------------


def _sync_check(
    cg: ConsumerGroupState, member_id: str, generation: int
) -> tuple[str, CgMember | None]:
    member = cg.members.get(member_id)
    if member is None or member.classic is None:
        return "UNKNOWN_MEMBER_ID", None
    if generation != member.epoch:
        return "ILLEGAL_GENERATION", member
    return "NONE", member


async def join(coord: GroupCoordinator, group: Group, req: JoinRequest) -> JoinResult:
    """A classic JoinGroup to a consumer group (Kafka's classicGroupJoinToConsumerGroup)."""
    cg = group.consumer
    assert cg is not None
    parsed = None
    protocol = None
    if req.protocol_type == CONSUMER:
        for name, meta in req.protocols:
            parsed = parse_subscription(meta)
            if parsed is not None:
                protocol = name
                break
    if parsed is None or protocol is None:
        return JoinResult("INCONSISTENT_GROUP_PROTOCOL", req.member_id)
    topics, owned = parsed
    now = coord.loop_time
    member_id = req.member_id
    member = cg.members.get(member_id) if member_id else None
    bump = False
    if member_id and member is None:
        return JoinResult("UNKNOWN_MEMBER_ID", member_id)
    if member is not None and member.classic is None:
        return JoinResult("INCONSISTENT_GROUP_PROTOCOL", member_id)
    if member is None:
        if req.instance_id is not None and req.instance_id in cg.static:
            old = cg.members.get(cg.static[req.instance_id])
            if old is not None and old.classic is None:
                return JoinResult("INCONSISTENT_GROUP_PROTOCOL", member_id)
            if old is not None:
                # A static classic member back under a new id replaces the old one.
                coord._consumer_remove(group, cg, old.member_id, "replaced (static)")
        member_id = f"{req.instance_id or req.client_id}-{uuid.uuid4()}"
        member = CgMember(member_id, req.instance_id)
        cg.add(member)
        bump = True
    member.classic = ClassicMeta(req.session_timeout_ms, list(req.protocols))
    member.client_id, member.client_host = req.client_id, req.client_host
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    member.deadline = now + req.session_timeout_ms / 1000
    if topics != member.topics:
        member.topics = topics
        bump = True
    counts = await req.partition_counts(cg.subscribed()) if req.partition_counts else {}
    if group.consumer is not cg or coord.groups.get(group.group_id) is not group:
        return JoinResult("NOT_COORDINATOR", member_id)  # moved while reading metadata
    metadata = {t: n for t, n in counts.items() if t in cg.subscribed()}
    if metadata != cg.partitions:
        cg.partitions = metadata
        bump = True
    if bump:
        cg.epoch += 1
    if cg.epoch > cg.assignment_epoch:
        cg.compute_target()
    # A classic member reports what it owns only in its JoinGroup: reconcile as far as
    # that allows (revoke, then take the free partitions).
    for _ in range(3):
        if not cg.reconcile(member, owned, now):
            break
    if not await coord._persist(group):
        return JoinResult("NOT_COORDINATOR", member_id)
    return JoinResult("NONE", member_id, member.epoch, CONSUMER, protocol, "", [])


async def sync(
    coord: GroupCoordinator,
    group: Group,
    member_id: str,
    generation: int,
    protocol_type: str | None,
    protocol: str | None,
) -> SyncResult:
    cg = group.consumer
    assert cg is not None
    error, member = _sync_check(cg, member_id, generation)
    if member is None or error != "NONE":
        return SyncResult(error)
    assert member.classic is not None
    names = [n for n, _ in member.classic.protocols]
    if (protocol_type is not None and protocol_type != CONSUMER) or (
        protocol is not None and protocol not in names
    ):
        return SyncResult("INCONSISTENT_GROUP_PROTOCOL")
    member.deadline = coord.loop_time + member.classic.session_timeout_ms / 1000
    return SyncResult("NONE", CONSUMER, protocol or names[0], encode_assignment(member.assigned))


def heartbeat(coord: GroupCoordinator, group: Group, member_id: str, generation: int) -> str:
    cg = group.consumer
    assert cg is not None
    error, member = _sync_check(cg, member_id, generation)
    if member is None or error != "NONE":
        return error
    assert member.classic is not None
    member.deadline = coord.loop_time + member.classic.session_timeout_ms / 1000
    if member.state != "stable" or member.epoch != cg.assignment_epoch:
        return "REBALANCE_IN_PROGRESS"  # it must rejoin to give up or get partitions
    return "NONE"
