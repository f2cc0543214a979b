"""KIP-848's reconciliation step (Kafka's CurrentAssignmentBuilder), shared by consumer
groups (topic partitions) and streams groups (tasks: subtopology, partition): a member
first revokes what its target no longer holds, keeping its epoch; once its heartbeat
no longer lists those, it takes the new epoch and whatever of its target no other
member still holds. So nothing ever has two owners."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

Assignment = dict[str, list[int]]  # topic or subtopology id -> sorted partitions
Pairs = set[tuple[str, int]]

# step() outcomes
WAITING = "waiting"  # revoking and not yet given up, or stable at the group's epoch
REVOKING = "revoking"  # it has just been asked to revoke
MOVED = "moved"  # at the assignment epoch with what it may take now (maybe unchanged)


class Reconciled(Protocol):
    epoch: int
    previous_epoch: int
    state: str
    assigned: Assignment
    revoking: Assignment
    rebalance_timeout_ms: int
    revoke_deadline: float


def pairs(assignment: Assignment) -> Pairs:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def grouped(items: Iterable[tuple[str, int]]) -> Assignment:
    out: Assignment = {}
    for t, p in sorted(items):
        out.setdefault(t, []).append(p)
    return out


def held_by(members: Iterable[Any], member_id: str) -> Pairs:
    """What the other members own or have not yet revoked."""
    out: Pairs = set()
    for m in members:
        if m.member_id != member_id:
            out |= pairs(m.assigned) | pairs(m.revoking)
    return out


def step(
    member: Reconciled,
    owned: Pairs | None,
    target: Pairs,
    held_by_others: Callable[[], Pairs],
    assignment_epoch: int,
    now: float,
    states: tuple[str, str, str],
) -> str:
    """Move `member` one step towards `target`; `owned` is what its heartbeat says it
    holds (None: unchanged, unknown); `states` the group type's names of stable,
    unrevoked and unreleased."""
    stable, unrevoked, unreleased = states
    if member.state == unrevoked:
        if owned is None or owned & pairs(member.revoking):
            return WAITING  # it has not yet given them up
        member.revoking = {}
    elif member.state == stable and member.epoch == assignment_epoch:
        return WAITING
    current = pairs(member.assigned)
    revoke = current - target
    if revoke:
        member.assigned = grouped(current & target)
        member.revoking = grouped(revoke)
        member.state = unrevoked
        member.revoke_deadline = now + member.rebalance_timeout_ms / 1000
        return REVOKING
    wanted = target - current
    free = wanted - held_by_others()
    member.assigned = grouped(current | free)
    if member.epoch != assignment_epoch:
        member.previous_epoch = member.epoch
        member.epoch = assignment_epoch
    member.state = unreleased if wanted - free else stable
    return MOVED
