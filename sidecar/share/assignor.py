"""Share-group partition assignment, behaving as Kafka's `simple` share assignor
(group-coordinator's SimpleAssignor, Kafka 4.1+): balance first, then stickiness.

With M members over P partitions each partition is shared by ceil(M / P) members (one
while there are at least as many partitions as members), and the sharing * P
assignments are spread so that member counts differ by at most one (the first members
in join order take the larger shares). A member keeps the partitions it has as long as
that holds; over-shared partitions are taken from over-full members first, then
partitions are handed to members below their share, partition by partition.

Members subscribed to the same topics are balanced over all their partitions together
(Kafka's homogeneous case); with differing subscriptions each topic is balanced over
its own subscribers."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

TP = tuple[Hashable, int]  # (topic, partition)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def balance(
    members: Sequence[str], targets: Sequence[TP], current: dict[str, set[TP]]
) -> dict[str, set[TP]]:
    """Every member's partitions of `targets` (in a fixed order), given each member's
    current ones."""
    out: dict[str, set[TP]] = {m: set() for m in members}
    n_members, n_parts = len(members), len(targets)
    if not n_members or not n_parts:
        return out
    sharing = _ceil_div(n_members, n_parts)
    slots = sharing * n_parts
    desired = {
        m: _ceil_div(slots * (i + 1), n_members) - _ceil_div(slots * i, n_members)
        for i, m in enumerate(members)
    }
    wanted = set(targets)
    by_part: dict[TP, list[str]] = {tp: [] for tp in targets}
    for m in members:  # keep what each member has and still subscribes to
        for tp in sorted(current.get(m, set()) & wanted, key=targets.index):
            out[m].add(tp)
            by_part[tp].append(m)
    over = {m for m in members if len(out[m]) > desired[m]}
    for tp, holders in by_part.items():  # partitions shared by more members than wanted
        for m in sorted(holders, key=lambda m: m not in over):
            if len(holders) <= sharing:
                break
            holders.remove(m)
            out[m].discard(tp)
    for m in members:  # members still holding more than their share
        extra = len(out[m]) - desired[m]
        if extra > 0:
            for tp in sorted(out[m], key=targets.index, reverse=True)[:extra]:
                out[m].discard(tp)
                by_part[tp].remove(m)
    unfilled = [m for m in members if len(out[m]) < desired[m]]
    i = 0
    for tp in targets:
        holders = by_part[tp]
        tried = 0
        while len(holders) < sharing and unfilled and tried < len(unfilled):
            m = unfilled[i % len(unfilled)]
            if m in holders:
                i += 1
                tried += 1
                continue
            holders.append(m)
            out[m].add(tp)
            tried = 0
            if len(out[m]) >= desired[m]:
                unfilled.remove(m)  # the next member slides into position i
            else:
                i += 1
        if not unfilled:
            break
    return out


def assign(
    subscriptions: dict[str, list[str]],
    partitions: dict[str, int],
    current: dict[str, set[TP]],
) -> dict[str, set[TP]]:
    """Members (in join order) -> their (topic, partition)s. `subscriptions` holds each
    member's topic names, `partitions` the partition count of every existing topic."""
    members = list(subscriptions)
    out: dict[str, set[TP]] = {m: set() for m in members}
    subs = {
        m: sorted(t for t in set(topics) if t in partitions) for m, topics in subscriptions.items()
    }
    if len({tuple(s) for s in subs.values()}) <= 1:
        topics = subs[members[0]] if members else []
        targets = [(t, p) for t in topics for p in range(partitions[t])]
        return balance(members, targets, current) if members else out
    for topic in sorted({t for s in subs.values() for t in s}):
        who = [m for m in members if topic in subs[m]]
        targets = [(topic, p) for p in range(partitions[topic])]
        mine = {m: {tp for tp in current.get(m, ()) if tp[0] == topic} for m in who}
        for m, tps in balance(who, targets, mine).items():
            out[m] |= tps
    return out
