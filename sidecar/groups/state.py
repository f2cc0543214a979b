"""In-memory state of one consumer group on its coordinator, and its JSON form in
Redis. Only the coordinator holding the group's lease keeps it in memory; the JSON
is written when a generation completes (SyncGroup from the leader), when a static
member is replaced and when the group empties, as Kafka writes group metadata to
__consumer_offsets, so a sidecar taking over resumes from the last stable point."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sidecar.groups.consumer_group import ConsumerGroupState
from sidecar.groups.consumer_protocol import CONSUMER, subscribed_topics
from sidecar.groups.streams_group import StreamsGroupState


class State(StrEnum):
    EMPTY = "Empty"
    PREPARING = "PreparingRebalance"
    COMPLETING = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class JoinResult:
    error: str
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: str
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    deadline: float = 0.0  # loop time when the session expires without a heartbeat
    is_new: bool = False
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[SyncResult] | None = None

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    @property
    def joining(self) -> bool:
        """A JoinGroup of this member waits for its answer (a client that hung up
        cancels its wait, and then is not counted as rejoined)."""
        return self.join_waiter is not None and not self.join_waiter.done()

    def keep_alive(self) -> bool:
        """Kafka: members waiting for a JoinGroup or SyncGroup answer count as alive,
        except new members, whose join is bounded by the new-member timeout."""
        if self.is_new:
            return False
        syncing = self.sync_waiter is not None and not self.sync_waiter.done()
        return self.joining or syncing

    def answer_join(self, result: JoinResult) -> None:
        if self.join_waiter is not None:
            if not self.join_waiter.done():
                self.join_waiter.set_result(result)
            self.join_waiter = None

    def answer_sync(self, result: SyncResult) -> None:
        if self.sync_waiter is not None:
            if not self.sync_waiter.done():
                self.sync_waiter.set_result(result)
            self.sync_waiter = None


@dataclass(slots=True)
class Group:
    group_id: str
    state: State = State.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    pending: dict[str, float] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids -> deadline
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_sync: set[str] = field(default_factory=set)
    state_ms: int = -1  # wall-clock ms of the last move to Empty (offset expiry)
    join_deadline: float = 0.0
    initial_delay: bool = False  # the first rebalance of an empty group waits for more joins
    initial_remaining_ms: int = 0
    new_member_added: bool = False
    sync_deadline: float = 0.0
    # A KIP-848 consumer group (group.protocol=consumer): its members live here, not in
    # `members`; `state` is then Empty or Stable, for offset expiry.
    consumer: ConsumerGroupState | None = None
    # After a downgrade (groups/mixed.py): each member's epoch in the consumer group,
    # accepted as its generation until the next generation completes.
    legacy_epochs: dict[str, int] = field(default_factory=dict)
    # A KIP-1071 streams group (group.protocol=streams): like `consumer`, its members
    # live there and `state` is Empty or Stable.
    streams: StreamsGroupState | None = None

    # -- membership -----------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader is None:
            self.leader = member.member_id
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member and member.instance_id is not None:
            if self.static.get(member.instance_id) == member_id:
                del self.static[member.instance_id]
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        self.pending.pop(member_id, None)
        self.pending_sync.discard(member_id)

    def replace_static(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """A static member rejoined with a new member id: the old id is fenced."""
        member = self.members.pop(old_id)
        member.answer_join(JoinResult("FENCED_INSTANCE_ID", old_id))
        member.answer_sync(SyncResult("FENCED_INSTANCE_ID"))
        member.member_id = new_id
        self.members[new_id] = member
        self.static[instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def fenced(self, instance_id: str | None, member_id: str) -> bool:
        return (
            instance_id is not None
            and instance_id in self.static
            and self.static[instance_id] != member_id
        )

    def validate_member(self, member_id: str, instance_id: str | None) -> str | None:
        """Kafka's validateCurrentMember: the error for a member id, or None."""
        if instance_id is not None:
            if instance_id not in self.static:
                return "UNKNOWN_MEMBER_ID"
            if self.static[instance_id] != member_id:
                return "FENCED_INSTANCE_ID"
            return None
        return None if member_id in self.members else "UNKNOWN_MEMBER_ID"

    def awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.joining)

    def all_joined(self) -> bool:
        return self.awaiting_join() == len(self.members) and not self.pending

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]], me: str) -> bool:
        """Kafka's supportsProtocols: an empty group takes any non-empty protocol set;
        otherwise the type must match and one protocol must be shared by all."""
        others = [m for m in self.members.values() if m.member_id != me]
        if not others:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        return any(
            all(any(n == name for n, _ in m.protocols) for m in others) for name, _ in protocols
        )

    def select_protocol(self) -> str:
        members = list(self.members.values())
        candidates = [
            name
            for name, _ in members[0].protocols
            if all(any(n == name for n, _ in m.protocols) for m in members)
        ]
        votes = {name: 0 for name in candidates}
        for m in members:
            for name, _ in m.protocols:
                if name in votes:
                    votes[name] += 1
                    break
        return max(candidates, key=lambda name: votes[name])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol); None if unknown."""
        if self.consumer is not None:
            return self.consumer.subscribed()
        if self.streams is not None:
            topology = self.streams.topology
            return topology.topics() if topology is not None else set()
        if self.protocol_type != CONSUMER or self.protocol is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            got = subscribed_topics(m.metadata(self.protocol))
            if got is None:
                return None
            topics |= got
        return topics

    def leader_members(self) -> list[tuple[str, str | None, bytes]]:
        return [
            (m.member_id, m.instance_id, m.metadata(self.protocol)) for m in self.members.values()
        ]

    # -- persistence ------------------------------------------------------------

    def to_json(self, assignments: dict[str, bytes] | None = None) -> bytes:
        members = []
        for m in self.members.values():
            assignment = assignments.get(m.member_id, b"") if assignments else m.assignment
            members.append(
                {
                    "id": m.member_id,
                    "instance": m.instance_id,
                    "client": m.client_id,
                    "host": m.client_host,
                    "session": m.session_timeout_ms,
                    "rebalance": m.rebalance_timeout_ms,
                    "protocols": [[n, base64.b64encode(meta).decode()] for n, meta in m.protocols],
                    "assignment": base64.b64encode(assignment).decode(),
                }
            )
        doc: dict[str, Any] = {
            "state": State.STABLE if members else State.EMPTY,
            "generation": self.generation,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol,
            "leader": self.leader,
            "state_ms": self.state_ms,
            "members": members,
        }
        if self.consumer is not None:
            doc["state"] = State.STABLE if self.consumer.members else State.EMPTY
            doc["consumer"] = self.consumer.to_doc()
        if self.streams is not None:
            doc["state"] = State.STABLE if self.streams.members else State.EMPTY
            doc["streams"] = self.streams.to_doc()
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(
        cls, group_id: str, raw: bytes | None, now: float, session_timeout_ms: int = 45_000
    ) -> Group:
        group = cls(group_id)
        if raw is None:
            return group
        doc = json.loads(raw)
        group.generation = int(doc["generation"])
        group.protocol_type = doc.get("protocol_type")
        group.protocol = doc.get("protocol")
        group.state_ms = int(doc.get("state_ms", -1))
        for m in doc["members"]:
            member = Member(
                member_id=m["id"],
                instance_id=m["instance"],
                client_id=m["client"],
                client_host=m["host"],
                session_timeout_ms=int(m["session"]),
                rebalance_timeout_ms=int(m["rebalance"]),
                protocol_type=group.protocol_type or "",
                protocols=[(n, base64.b64decode(meta)) for n, meta in m["protocols"]],
                assignment=base64.b64decode(m["assignment"]),
                # Members keep their session from the moment this sidecar takes over.
                deadline=now + int(m["session"]) / 1000,
            )
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static[member.instance_id] = member.member_id
        if "consumer" in doc:
            group.consumer = ConsumerGroupState.from_doc(
                doc["consumer"], now + session_timeout_ms / 1000
            )
            for cm in group.consumer.members.values():
                if cm.classic is not None:  # a mixed group's classic member: its own session
                    cm.deadline = now + cm.classic.session_timeout_ms / 1000
            if group.consumer.members:
                group.state = State.STABLE
        if "streams" in doc:
            group.streams = StreamsGroupState.from_doc(
                doc["streams"], now + session_timeout_ms / 1000
            )
            if group.streams.members:
                group.state = State.STABLE
        group.leader = doc.get("leader") if doc.get("leader") in group.members else None
        if group.members:
            group.state = State.STABLE
            group.leader = group.leader or next(iter(group.members))
        return group
