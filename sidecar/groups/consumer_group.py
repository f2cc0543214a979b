"""KIP-848 consumer groups (`group.protocol=consumer`): the state a group keeps beside
the classic one, the broker-side assignors and the reconciliation of one member's
assignment towards its target, as Kafka's GroupMetadataManager does them.

The group epoch grows on every change of membership, subscriptions or partition counts;
a new target assignment is then computed at that epoch (the assignment epoch). Each
member moves towards its target on its own heartbeats: it first gives up (revokes) the
partitions it must lose, keeping its epoch, and only once its heartbeat no longer lists
them does it get the new epoch and the partitions no other member still holds; those
come on a later heartbeat, after their previous owner released them. So no partition
ever has two owners. Everything here is pure (no I/O): groups/coordinator.py calls it
and persists the result with the classic group's JSON."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from sidecar.groups import reconciliation

UNIFORM, RANGE = "uniform", "range"
ASSIGNORS = (UNIFORM, RANGE)  # group.consumer.assignors: the first is the default

STABLE, UNREVOKED, UNRELEASED = "stable", "unrevoked_partitions", "unreleased_partitions"
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2

Assignment = dict[str, list[int]]  # topic name -> sorted partitions


@dataclass(slots=True)
class ClassicMeta:
    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]

    def doc(self) -> dict[str, Any]:
        return {
            "session": self.session_timeout_ms,
            "protocols": [[n, base64.b64encode(m).decode()] for n, m in self.protocols],
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> ClassicMeta:
        return cls(int(doc["session"]), [(n, base64.b64decode(m)) for n, m in doc["protocols"]])


@dataclass(slots=True)
class CgMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topics: list[str] = field(default_factory=list)  # named explicitly
    regex: str | None = None  # SubscribedTopicRegex
    matched: list[str] = field(default_factory=list)  # the topics `regex` resolved to
    assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    epoch: int = 0
    previous_epoch: int = 0
    state: str = STABLE
    assigned: Assignment = field(default_factory=dict)
    revoking: Assignment = field(default_factory=dict)
    deadline: float = 0.0  # loop time: the session ends without a heartbeat
    revoke_deadline: float = 0.0  # loop time: fenced if it still holds revoked partitions
    # A classic member (JoinGroup/SyncGroup/Heartbeat) of a mixed group: its session
    # timeout and protocols [(name, metadata)] (Kafka's ClassicMemberMetadata).
    classic: ClassicMeta | None = None
    resolved_at: float = float("-inf")  # loop time `regex` was last resolved

    def subscription(self) -> list[str]:
        """The assignor's input: the named topics and those the regex matched."""
        return sorted(set(self.topics) | set(self.matched))

    def doc(self) -> dict[str, Any]:
        return {
            "id": self.member_id,
            "instance": self.instance_id,
            "rack": self.rack_id,
            "client": self.client_id,
            "host": self.client_host,
            "topics": self.topics,
            "regex": self.regex,
            "matched": self.matched,
            "assignor": self.assignor,
            "rebalance": self.rebalance_timeout_ms,
            "epoch": self.epoch,
            "prev": self.previous_epoch,
            "state": self.state,
            "assigned": self.assigned,
            "revoking": self.revoking,
            **({"classic": self.classic.doc()} if self.classic is not None else {}),
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> CgMember:
        return cls(
            member_id=doc["id"],
            instance_id=doc.get("instance"),
            rack_id=doc.get("rack"),
            client_id=doc.get("client", ""),
            client_host=doc.get("host", ""),
            topics=list(doc.get("topics", [])),
            regex=doc.get("regex"),
            matched=list(doc.get("matched", [])),
            assignor=doc.get("assignor"),
            rebalance_timeout_ms=int(doc.get("rebalance", 300_000)),
            epoch=int(doc["epoch"]),
            previous_epoch=int(doc.get("prev", 0)),
            state=doc.get("state", STABLE),
            assigned={t: list(ps) for t, ps in doc.get("assigned", {}).items()},
            revoking={t: list(ps) for t, ps in doc.get("revoking", {}).items()},
            classic=ClassicMeta.from_doc(doc["classic"]) if "classic" in doc else None,
        )


@dataclass(slots=True)
class ConsumerGroupState:
    epoch: int = 0  # the group epoch
    assignment_epoch: int = 0  # the epoch the target assignment was computed at
    members: dict[str, CgMember] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target
    partitions: dict[str, int] = field(default_factory=dict)  # subscribed topic -> count

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroup states (the target is computed at once, so no Assigning)."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.epoch:
            return "Assigning"
        if any(
            m.state != STABLE or m.epoch != self.assignment_epoch for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def subscribed(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscription()}

    def assignor(self) -> str:
        """The assignor most members ask for (Kafka's preferred server assignor), else
        the default."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.assignor:
                votes[m.assignor] = votes.get(m.assignor, 0) + 1
        if not votes:
            return ASSIGNORS[0]
        return max(sorted(votes), key=lambda name: votes[name])

    def add(self, member: CgMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> CgMember | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.instance_id is not None:
            if self.static.get(member.instance_id) == member_id:
                del self.static[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def compute_target(self) -> None:
        """A new target assignment at the group epoch."""
        subs = {m.member_id: m.subscription() for m in self.members.values()}
        if self.assignor() == RANGE:
            self.target = range_assign(subs, self.partitions)
        else:
            self.target = uniform_assign(subs, self.partitions, self.target)
        self.assignment_epoch = self.epoch

    def held_by_others(self, member_id: str) -> set[tuple[str, int]]:
        """Partitions another member owns or has not yet revoked."""
        return reconciliation.held_by(self.members.values(), member_id)

    def reconcile(self, member: CgMember, owned: set[tuple[str, int]] | None, now: float) -> bool:
        """Move `member` towards its target (Kafka's CurrentAssignmentBuilder); `owned`
        is what its heartbeat says it holds (None: unchanged, unknown). True if the
        member's epoch, state or partitions changed."""
        before = (member.epoch, member.state, member.assigned)
        outcome = reconciliation.step(
            member,
            owned,
            reconciliation.pairs(self.target.get(member.member_id, {})),
            lambda: self.held_by_others(member.member_id),
            self.assignment_epoch,
            now,
            (STABLE, UNREVOKED, UNRELEASED),
        )
        if outcome == reconciliation.REVOKING:
            return True
        return outcome == reconciliation.MOVED and before != (
            member.epoch,
            member.state,
            member.assigned,
        )

    def to_doc(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "assignment_epoch": self.assignment_epoch,
            "members": [m.doc() for m in self.members.values()],
            "target": self.target,
            "partitions": self.partitions,
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any], deadline: float) -> ConsumerGroupState:
        cg = cls(int(doc["epoch"]), int(doc["assignment_epoch"]))
        for m in doc.get("members", []):
            member = CgMember.from_doc(m)
            # Members keep their session from the moment this sidecar takes over.
            member.deadline = deadline
            member.revoke_deadline = deadline
            cg.add(member)
        cg.target = {
            mid: {t: list(ps) for t, ps in a.items()} for mid, a in doc.get("target", {}).items()
        }
        cg.partitions = {t: int(n) for t, n in doc.get("partitions", {}).items()}
        return cg


def uniform_assign(
    subs: dict[str, list[str]], partitions: dict[str, int], previous: dict[str, Assignment]
) -> dict[str, Assignment]:
    """Kafka's `uniform` assignor, in spirit: balanced (member counts differ by at most
    one among members sharing a subscription) and sticky (a partition stays with its
    previous target owner unless balance needs it elsewhere)."""
    subscribers: dict[str, list[str]] = {}
    for member_id in sorted(subs):
        for topic in set(subs[member_id]):
            if topic in partitions:
                subscribers.setdefault(topic, []).append(member_id)
    owner: dict[tuple[str, int], str] = {}
    counts = dict.fromkeys(subs, 0)
    for member_id in sorted(subs):
        for topic, ps in previous.get(member_id, {}).items():
            if member_id not in subscribers.get(topic, ()):
                continue
            for p in ps:
                if p < partitions[topic] and (topic, p) not in owner:
                    owner[(topic, p)] = member_id
                    counts[member_id] += 1
    everything = sorted((t, p) for t in subscribers for p in range(partitions[t]))
    # Partitions with fewer candidates first, each to its least-loaded candidate.
    for topic, p in sorted(
        (tp for tp in everything if tp not in owner), key=lambda tp: (len(subscribers[tp[0]]), tp)
    ):
        chosen = min(subscribers[topic], key=lambda m: (counts[m], m))
        owner[(topic, p)] = chosen
        counts[chosen] += 1
    # Balance: move a partition from a member holding more than one above the
    # least-loaded candidate for it. Each move lowers the sum of squared counts.
    moved = True
    while moved:
        moved = False
        for tp in reversed(everything):
            current = owner[tp]
            chosen = min(subscribers[tp[0]], key=lambda m: (counts[m], m))
            if counts[current] > counts[chosen] + 1:
                owner[tp] = chosen
                counts[current] -= 1
                counts[chosen] += 1
                moved = True
    out: dict[str, Assignment] = {m: {} for m in subs}
    for (topic, p), member_id in sorted(owner.items()):
        out[member_id].setdefault(topic, []).append(p)
    return out


def range_assign(subs: dict[str, list[str]], partitions: dict[str, int]) -> dict[str, Assignment]:
    """Kafka's `range` assignor: per topic, its subscribers in member-id order each take
    a contiguous range, the first (partitions % members) one partition more."""
    out: dict[str, Assignment] = {m: {} for m in subs}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subs.items() if topic in topics)
        if not members:
            continue
        quota, extra = divmod(partitions[topic], len(members))
        start = 0
        for i, member_id in enumerate(members):
            n = quota + (1 if i < extra else 0)
            if n:
                out[member_id][topic] = list(range(start, start + n))
            start += n
    return out
