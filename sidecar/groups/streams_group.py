"""KIP-1071 streams groups (`group.protocol=streams`): the topology a group keeps, its
configuration against the topics that exist (task counts, internal topics to create),
the task assignor and each member's reconciliation, as Kafka's GroupMetadataManager
and its `streams` package do them.

A task is (subtopology id, partition). The group epoch grows on every change of
membership, topology or configured task counts; a target assignment is then computed
at that epoch. Members move towards their target as KIP-848 consumers do: tasks to
give up are revoked first (the member keeps its epoch), and a task moves to its new
owner only once its previous owner's heartbeat no longer lists it. Standby tasks
(`--group-streams-num-standby-replicas`, Kafka's default 0) go to members of other
processes than the active owner and need no hand-over; warm-up tasks are not used.
Everything here is pure (no I/O): groups/coordinator.py
calls it and persists the result with the group's JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sidecar.groups import reconciliation

STABLE, UNREVOKED, UNRELEASED = "stable", "unrevoked_tasks", "unreleased_tasks"
UNREVOKED_TASKS = UNREVOKED
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2
ASSIGNOR = "sticky"  # group.streams.assignors' default

# StreamsGroupHeartbeatResponse.Status codes (Kafka's enum)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4

Tasks = dict[str, list[int]]  # subtopology id -> sorted partitions


_pairs, _tasks = reconciliation.pairs, reconciliation.grouped


@dataclass(slots=True)
class InternalTopic:
    name: str
    partitions: int  # 0: derived
    replication: int = 0
    configs: dict[str, str] = field(default_factory=dict)

    def doc(self) -> list[Any]:
        return [self.name, self.partitions, self.replication, self.configs]

    @classmethod
    def from_doc(cls, doc: list[Any]) -> InternalTopic:
        return cls(doc[0], int(doc[1]), int(doc[2]), dict(doc[3]))


@dataclass(slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: list[str]
    repartition_sources: list[InternalTopic]
    repartition_sinks: list[str]
    changelogs: list[InternalTopic]
    copartition_groups: list[list[str]]

    def doc(self) -> dict[str, Any]:
        return {
            "id": self.subtopology_id,
            "sources": self.source_topics,
            "rsources": [t.doc() for t in self.repartition_sources],
            "rsinks": self.repartition_sinks,
            "changelogs": [t.doc() for t in self.changelogs],
            "copart": self.copartition_groups,
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Subtopology:
        return cls(
            doc["id"],
            list(doc["sources"]),
            [InternalTopic.from_doc(t) for t in doc["rsources"]],
            list(doc["rsinks"]),
            [InternalTopic.from_doc(t) for t in doc["changelogs"]],
            [list(g) for g in doc.get("copart", [])],
        )


@dataclass(slots=True)
class Topology:
    epoch: int
    subtopologies: list[Subtopology]

    def doc(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "subs": [s.doc() for s in self.subtopologies]}

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Topology:
        return cls(int(doc["epoch"]), [Subtopology.from_doc(s) for s in doc["subs"]])

    def topics(self) -> set[str]:
        """Every topic the topology names (sources, internal topics)."""
        out: set[str] = set()
        for s in self.subtopologies:
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_sources)
            out.update(t.name for t in s.changelogs)
        return out

    def source_topics(self, subtopology_id: str) -> list[str]:
        """A subtopology's source topics, including its repartition source topics."""
        for s in self.subtopologies:
            if s.subtopology_id == subtopology_id:
                return [*s.source_topics, *(t.name for t in s.repartition_sources)]
        return []


@dataclass(slots=True)
class Configured:
    """The topology against the topics that exist (Kafka's ConfiguredTopology)."""

    tasks: dict[str, int]  # subtopology id -> number of tasks; empty when not ready
    to_create: dict[str, tuple[int, dict[str, str]]]  # internal topic -> (partitions, configs)
    status: list[tuple[int, str]]  # (status code, detail)


def configure(topology: Topology, partitions: dict[str, int]) -> Configured:
    """Kafka's InternalTopicManager.configureTopics: `partitions` holds the counts of
    the topics that exist. Missing source topics make the group not ready; missing
    internal topics are to be created (changelogs with the subtopology's task count,
    repartition topics with their own count or their writers' task count)."""
    missing = sorted(
        {t for s in topology.subtopologies for t in s.source_topics if t not in partitions}
    )
    if missing:
        return Configured(
            {}, {}, [(MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing.")]
        )
    # Repartition topics' partition counts: given, existing, or the largest task count
    # of the subtopologies writing to them (iterated to a fixed point).
    repart: dict[str, int] = {}
    for s in topology.subtopologies:
        for t in s.repartition_sources:
            if t.partitions > 0:
                repart[t.name] = t.partitions
            elif t.name in partitions:
                repart[t.name] = partitions[t.name]
    changed = True
    while changed:
        changed = False
        for s in topology.subtopologies:
            counts = [partitions[t] for t in s.source_topics]
            counts += [repart[t.name] for t in s.repartition_sources if t.name in repart]
            known = len(counts) == len(s.source_topics) + len(s.repartition_sources)
            if not counts or not known:
                continue
            for sink in s.repartition_sinks:
                n = max(counts)
                if sink not in repart and any(
                    sink == t.name for o in topology.subtopologies for t in o.repartition_sources
                ):
                    repart[sink] = n
                    changed = True
    tasks: dict[str, int] = {}
    for s in topology.subtopologies:
        counts = [partitions[t] for t in s.source_topics]
        counts += [repart.get(t.name, 0) for t in s.repartition_sources]
        if not counts or min(counts) <= 0:
            return Configured(
                {},
                {},
                [
                    (
                        INCORRECTLY_PARTITIONED_TOPICS,
                        "Failed to compute number of partitions for all repartition topics.",
                    )
                ],
            )
        tasks[s.subtopology_id] = max(counts)
    to_create: dict[str, tuple[int, dict[str, str]]] = {}
    for s in topology.subtopologies:
        for t in s.repartition_sources:
            if t.name not in partitions:
                to_create[t.name] = (repart[t.name], t.configs)
        for t in s.changelogs:
            if t.name not in partitions:
                to_create[t.name] = (tasks[s.subtopology_id], t.configs)
    if to_create:
        return Configured(
            {},
            to_create,
            [
                (
                    MISSING_INTERNAL_TOPICS,
                    f"Internal topics are missing: {', '.join(sorted(to_create))}",
                )
            ],
        )
    return Configured(tasks, {}, [])


@dataclass(slots=True)
class StreamsMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    process_id: str = ""
    endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    topology_epoch: int = 0
    rebalance_timeout_ms: int = 300_000
    epoch: int = 0
    previous_epoch: int = 0
    state: str = STABLE
    assigned: Tasks = field(default_factory=dict)  # active tasks
    revoking: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)  # standby tasks
    deadline: float = 0.0
    revoke_deadline: float = 0.0

    def doc(self) -> dict[str, Any]:
        return {
            "id": self.member_id,
            "instance": self.instance_id,
            "rack": self.rack_id,
            "client": self.client_id,
            "host": self.client_host,
            "process": self.process_id,
            "endpoint": list(self.endpoint) if self.endpoint else None,
            "tags": self.client_tags,
            "topology": self.topology_epoch,
            "rebalance": self.rebalance_timeout_ms,
            "epoch": self.epoch,
            "prev": self.previous_epoch,
            "state": self.state,
            "assigned": self.assigned,
            "revoking": self.revoking,
            "standby": self.standby,
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> StreamsMember:
        endpoint = doc.get("endpoint")
        return cls(
            member_id=doc["id"],
            instance_id=doc.get("instance"),
            rack_id=doc.get("rack"),
            client_id=doc.get("client", ""),
            client_host=doc.get("host", ""),
            process_id=doc.get("process", ""),
            endpoint=(str(endpoint[0]), int(endpoint[1])) if endpoint else None,
            client_tags=dict(doc.get("tags", {})),
            topology_epoch=int(doc.get("topology", 0)),
            rebalance_timeout_ms=int(doc.get("rebalance", 300_000)),
            epoch=int(doc["epoch"]),
            previous_epoch=int(doc.get("prev", 0)),
            state=doc.get("state", STABLE),
            assigned={s: list(ps) for s, ps in doc.get("assigned", {}).items()},
            revoking={s: list(ps) for s, ps in doc.get("revoking", {}).items()},
            standby={s: list(ps) for s, ps in doc.get("standby", {}).items()},
        )


@dataclass(slots=True)
class StreamsGroupState:
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, StreamsMember] = field(default_factory=dict)
    static: dict[str, str] = field(default_factory=dict)
    target: dict[str, Tasks] = field(default_factory=dict)
    target_standby: dict[str, Tasks] = field(default_factory=dict)
    topology: Topology | None = None
    tasks: dict[str, int] = field(default_factory=dict)  # configured: subtopology -> count
    partitions: dict[str, int] = field(default_factory=dict)  # the topology's topics' counts
    endpoint_epoch: int = 0
    shutdown_member: str | None = None  # the member that asked the application to stop

    @property
    def state(self) -> str:
        """Kafka's StreamsGroupState names, as DescribeGroups and ListGroups show them."""
        if not self.members:
            return "Empty"
        if self.topology is None or not self.tasks:
            return "NotReady"
        if self.assignment_epoch < self.epoch:
            return "Assigning"
        if any(
            m.state != STABLE or m.epoch != self.assignment_epoch for m in self.members.values()
        ):
            return "Reconciling"
        return "Stable"

    def add(self, member: StreamsMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> StreamsMember | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.instance_id is not None:
            if self.static.get(member.instance_id) == member_id:
                del self.static[member.instance_id]
        self.target.pop(member_id, None)
        self.target_standby.pop(member_id, None)
        return member

    def compute_target(self, standby_replicas: int = 0) -> None:
        self.target = sticky_assign(sorted(self.members), self.tasks, self.target)
        processes = {m.member_id: m.process_id or m.member_id for m in self.members.values()}
        self.target_standby = standby_assign(
            processes, self.target, standby_replicas, self.target_standby
        )
        self.assignment_epoch = self.epoch
        self.endpoints_changed()

    def endpoints_changed(self) -> None:
        """A new endpoint epoch when members with an endpoint (interactive queries) may
        see another one's partitions; without endpoints it stays 0, as in Kafka."""
        if any(m.endpoint is not None for m in self.members.values()):
            self.endpoint_epoch += 1

    def held_by_others(self, member_id: str) -> set[tuple[str, int]]:
        return reconciliation.held_by(self.members.values(), member_id)

    def reconcile(
        self, member: StreamsMember, owned: set[tuple[str, int]] | None, now: float
    ) -> bool:
        """Move `member` towards its target (Kafka's streams CurrentAssignmentBuilder);
        `owned`: the active tasks its heartbeat lists (None: unchanged). True if its
        epoch, state or tasks changed."""
        before = (member.epoch, member.state, member.assigned, member.standby)
        running = _pairs(member.assigned)
        outcome = reconciliation.step(
            member,
            owned,
            _pairs(self.target.get(member.member_id, {})),
            lambda: self.held_by_others(member.member_id),
            self.assignment_epoch,
            now,
            (STABLE, UNREVOKED, UNRELEASED),
        )
        if outcome == reconciliation.WAITING:
            return False
        # Standby tasks need no hand-over; never one the member still runs actively.
        standby = _pairs(self.target_standby.get(member.member_id, {}))
        member.standby = _tasks(standby - running)
        if outcome == reconciliation.REVOKING:
            return True
        changed = before != (member.epoch, member.state, member.assigned, member.standby)
        if changed:
            self.endpoints_changed()
        return changed

    def to_doc(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "assignment_epoch": self.assignment_epoch,
            "members": [m.doc() for m in self.members.values()],
            "target": self.target,
            "target_standby": self.target_standby,
            "topology": self.topology.doc() if self.topology else None,
            "tasks": self.tasks,
            "partitions": self.partitions,
            "endpoint_epoch": self.endpoint_epoch,
            "shutdown": self.shutdown_member,
        }

    @classmethod
    def from_doc(cls, doc: dict[str, Any], deadline: float) -> StreamsGroupState:
        sg = cls(int(doc["epoch"]), int(doc["assignment_epoch"]))
        for m in doc.get("members", []):
            member = StreamsMember.from_doc(m)
            member.deadline = deadline
            member.revoke_deadline = deadline
            sg.add(member)
        sg.target = {
            mid: {s: list(ps) for s, ps in t.items()} for mid, t in doc.get("target", {}).items()
        }
        sg.target_standby = {
            mid: {s: list(ps) for s, ps in t.items()}
            for mid, t in doc.get("target_standby", {}).items()
        }
        if doc.get("topology"):
            sg.topology = Topology.from_doc(doc["topology"])
        sg.tasks = {s: int(n) for s, n in doc.get("tasks", {}).items()}
        sg.partitions = {t: int(n) for t, n in doc.get("partitions", {}).items()}
        sg.endpoint_epoch = int(doc.get("endpoint_epoch", 0))
        sg.shutdown_member = doc.get("shutdown")
        return sg


def sticky_assign(
    members: list[str], tasks: dict[str, int], previous: dict[str, Tasks]
) -> dict[str, Tasks]:
    """Active tasks over the members, balanced (counts differ by at most one) and sticky
    (a task stays with its previous owner unless balance needs it elsewhere), in the
    spirit of Kafka's StickyTaskAssignor (which balances over processes; here each
    member counts alone)."""
    out: dict[str, Tasks] = {m: {} for m in members}
    if not members:
        return out
    everything = sorted((s, p) for s, n in tasks.items() for p in range(n))
    owner: dict[tuple[str, int], str] = {}
    counts = dict.fromkeys(members, 0)
    quota = -(-len(everything) // len(members))  # ceil
    for m in members:
        for s, ps in sorted(previous.get(m, {}).items()):
            for p in ps:
                if p < tasks.get(s, 0) and (s, p) not in owner and counts[m] < quota:
                    owner[(s, p)] = m
                    counts[m] += 1
    # Spread the rest by partition first, so one member's tasks cover several subtopologies.
    for s, p in sorted((t for t in everything if t not in owner), key=lambda t: (t[1], t[0])):
        chosen = min(members, key=lambda m: (counts[m], m))
        owner[(s, p)] = chosen
        counts[chosen] += 1
    moved = True
    while moved:
        moved = False
        for t in reversed(everything):
            current = owner[t]
            chosen = min(members, key=lambda m: (counts[m], m))
            if counts[current] > counts[chosen] + 1:
                owner[t] = chosen
                counts[current] -= 1
                counts[chosen] += 1
                moved = True
    for (s, p), m in sorted(owner.items()):
        out[m].setdefault(s, []).append(p)
    return out


def standby_assign(
    processes: dict[str, str],
    active: dict[str, Tasks],
    replicas: int,
    previous: dict[str, Tasks],
) -> dict[str, Tasks]:
    """`replicas` standby copies of each active task, each on a member of another process
    than the task's active owner and than its other copies (Kafka's StickyTaskAssignor
    rule), a previous standby owner first, else the member with the fewest tasks; a copy
    with no such member is left out, as Kafka does."""
    out: dict[str, Tasks] = {m: {} for m in processes}
    if replicas <= 0 or not processes:
        return out
    load = {m: len(_pairs(active.get(m, {}))) for m in processes}
    owner = {t: m for m, tasks in active.items() for t in _pairs(tasks)}
    was = {m: _pairs(previous.get(m, {})) for m in processes}
    for task in sorted(owner):
        used = {processes[owner[task]]} if owner[task] in processes else set()
        for _ in range(replicas):
            candidates = [m for m in sorted(processes) if processes[m] not in used]
            if not candidates:
                break
            chosen = min(candidates, key=lambda m: (task not in was[m], load[m], m))
            out[chosen].setdefault(task[0], []).append(task[1])
            used.add(processes[chosen])
            load[chosen] += 1
    return {m: {s: sorted(ps) for s, ps in t.items()} for m, t in out.items()}
