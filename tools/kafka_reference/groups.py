"""Consumer groups: the member and scene helpers, FindCoordinator, JoinGroup, SyncGroup,
Heartbeat and LeaveGroup."""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable
from typing import Any

from .constants import (
    DESCRIBE_GROUPS,
    FIND_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    RETRIABLE_COORDINATOR,
    RUN,
    SYNC_GROUP,
)
from .talk import SetupError, Side, add, ask, ask_and_watch, error_of, make_topic, receive, topic

# -- consumer groups --------------------------------------------------------------------------

SESSION_MS = 30_000  # long enough that no member of a scenario expires while it runs
REBALANCE_MS = 10_000
MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS = 79, 27
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def group_id(label: str) -> str:
    return f"{RUN}-{label}"  # shown as ~label, like topics


def consumer_subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics (int32 count, int16-length names),
    user data (int32 length, -1 = null)."""
    out = struct.pack(">hi", 0, len(topics))
    for name in topics:
        out += struct.pack(">h", len(name.encode())) + name.encode()
    return out + struct.pack(">i", -1)


def consumer_assignment(topic_name: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: version, [topic, [partition]], user data -1."""
    raw = topic_name.encode()
    out = struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">i", len(partitions))
    out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


def member_id_format(member_id: Any) -> Any:
    return UUID_RE.sub("<uuid>", member_id) if isinstance(member_id, str) else member_id


def group_topic(side: Side) -> str:
    """Two partitions that the group scenarios commit offsets for and subscribe to."""
    make_topic(side, topic("grp"), 2)
    return topic("grp")


def other_topic(side: Side) -> str:
    make_topic(side, topic("grp-other"), 1)
    return topic("grp-other")


def coordinator_ready(side: Side) -> bool:
    """Kafka answers COORDINATOR_NOT_AVAILABLE until __consumer_offsets exists and
    COORDINATOR_LOAD_IN_PROGRESS while it loads: wait for both, like a client."""
    deadline = time.monotonic() + 30
    while True:
        found = ask(side, FIND_COORDINATOR, 3, {"key": group_id("ready"), "key_type": 0})
        if not isinstance(found, dict):
            raise SetupError(f"FindCoordinator: {found}")
        listed = (
            ask(side, LIST_GROUPS, 4, {"states_filter": []}) if found["error_code"] == 0 else {}
        )
        if not isinstance(listed, dict):
            raise SetupError(f"ListGroups: {listed}")
        if found["error_code"] == 0 and listed.get("error_code") == 0:
            return True
        if time.monotonic() > deadline:
            raise SetupError(f"group coordinator not ready: {found} {listed}")
        time.sleep(0.2)


class Scene:
    """One group scenario on one broker: its members (each on its own connection, so that
    joins waiting for a rebalance can be pipelined) and the member ids the broker handed
    out, which `out` shows as <label> (they are random) in the order they were learnt."""

    def __init__(self, side: Side) -> None:
        side.fixture("coordinator", coordinator_ready)
        side.fixture("grp", group_topic)
        side.fixture("grp-other", other_topic)
        self.side = side
        self.aliases: dict[str, str] = {}
        self.members: list[Member] = []
        self.transcript: list[dict[str, Any]] = []  # form_group's steps

    def note(self, step: str, answer: Any) -> None:
        self.transcript.append({"step": step, "answer": answer})

    def __enter__(self) -> Scene:
        return self

    def __exit__(self, *exc: object) -> None:
        for m in self.members:
            m.client.close()

    def member(self, label: str, group: str, **kwargs: Any) -> Member:
        m = Member(self, label, group, **kwargs)
        self.members.append(m)
        return m

    def learn(self, member_id: Any, label: str) -> None:
        if isinstance(member_id, str) and member_id:
            self.aliases.setdefault(member_id, f"<{label}>")

    def out(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {self.out(k): self.out(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.out(v) for v in value]
        if isinstance(value, str):
            value = self.aliases.get(value, value)
            return value if len(value) < 1000 else f"<{len(value)} characters>"
        return value

    def ask(self, api_key: int, version: int, body: Any) -> Any:
        return ask(self.side, api_key, version, body)

    def describe(self, *groups: str, version: int = 5) -> Any:
        answer = self.ask(DESCRIBE_GROUPS, version, {"groups": list(groups)})
        return answer["groups"] if isinstance(answer, dict) else answer

    def wait_state(self, group: str, state: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            [found] = self.describe(group)
            if found["group_state"] == state:
                return
            if time.monotonic() > deadline:
                raise SetupError(f"group {group} is {found['group_state']}, not {state}")
            time.sleep(0.02)

    def fetch_offsets(
        self, group: str, topics: dict[str, list[int]] | None, version: int = 8
    ) -> Any:
        return self.ask(OFFSET_FETCH, version, offset_fetch_body(group, topics))


Pending = tuple[int, int, int]  # api key, version, correlation id


class Member:
    def __init__(
        self,
        scene: Scene,
        label: str,
        group: str,
        instance_id: str | None = None,
        protocol_type: str = "consumer",
        protocols: list[tuple[str, bytes]] | None = None,
        session_ms: int = SESSION_MS,
    ) -> None:
        self.scene, self.label, self.group = scene, label, group
        self.client = scene.side.connect()
        self.instance_id = instance_id
        self.protocol_type = protocol_type
        self.protocols = protocols or [("range", consumer_subscription(topic("grp")))]
        self.session_ms = session_ms
        self.member_id = ""
        self.generation = -1

    def send(self, api_key: int, version: int, body: Any) -> Pending:
        return api_key, version, self.client.send(api_key, version, body)

    def recv(self, pending: Pending) -> Any:
        return receive(self.client, *pending)

    def ask(self, api_key: int, version: int, body: Any) -> Any:
        return self.recv(self.send(api_key, version, body))

    def send_join(self, version: int = 9, **changes: Any) -> Pending:
        body = {
            "group_id": self.group,
            "session_timeout": self.session_ms,
            "rebalance_timeout": REBALANCE_MS,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in self.protocols],
            "reason": None,
            **changes,
        }
        return self.send(JOIN_GROUP, version, body)

    def joined(self, pending: Pending) -> Any:
        """A JoinGroup answer; learns the member id and generation it carries."""
        answer = self.recv(pending)
        if not isinstance(answer, dict):
            raise SetupError(f"JoinGroup: {answer}")
        if answer["error_code"] in (0, MEMBER_ID_REQUIRED):
            self.scene.learn(answer["member_id"], self.label)
            self.member_id = answer["member_id"]
        if answer["error_code"] == 0:
            self.generation = answer["generation_id"]
        return answer

    def join(self, version: int = 9, **changes: Any) -> Any:
        return self.joined(self.send_join(version, **changes))

    def join_new(self, version: int = 9) -> list[Any]:
        """A first join: v4+ without an instance id answers MEMBER_ID_REQUIRED first."""
        answers = [self.join(version)]
        if answers[0]["error_code"] == MEMBER_ID_REQUIRED:
            answers.append(self.join(version))
        return answers

    def send_sync(
        self, version: int = 5, assignments: dict[str, bytes] | None = None, **changes: Any
    ) -> Pending:
        body = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocol_name": self.protocols[0][0],
            "assignments": [
                {"member_id": m, "assignment": a} for m, a in (assignments or {}).items()
            ],
            **changes,
        }
        return self.send(SYNC_GROUP, version, body)

    def sync(
        self, version: int = 5, assignments: dict[str, bytes] | None = None, **changes: Any
    ) -> Any:
        return self.recv(self.send_sync(version, assignments, **changes))

    def heartbeat(self, version: int = 4, fresh: bool = False, **changes: Any) -> Any:
        """fresh: on a new connection (this one may be waiting for its JoinGroup answer)."""
        body = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            **changes,
        }
        return (self.scene.ask if fresh else self.ask)(HEARTBEAT, version, body)

    def commit(self, offsets: dict[str, dict[int, int]], version: int = 9, **changes: Any) -> Any:
        body = offset_commit_body(
            self.group, offsets, self.generation, self.member_id, self.instance_id
        )
        return self.ask(OFFSET_COMMIT, version, {**body, **changes})


def assignment_for(m: Member) -> bytes:
    return consumer_assignment(topic("grp"), [ord(m.label[0]) % 2])


def form_group(
    scene: Scene, label: str, n: int = 1, version: int = 9, sync_version: int = 5, **kwargs: Any
) -> list[Member]:
    """A Stable group of n members (labels A, B, ...; A leads). The first joins and syncs
    alone (generation 1); each later one joins, the broker starts a rebalance, the members
    already in rejoin, and all sync (the leader sends every member's assignment)."""
    group = group_id(label)
    members: list[Member] = []
    for i in range(n):
        new = scene.member(chr(ord("A") + i), group, **kwargs)
        if members:
            first = new.join(version) if version >= 4 and new.instance_id is None else None
            if first is not None and first["error_code"] != MEMBER_ID_REQUIRED:
                raise SetupError(f"join of {new.label}: {first}")
            pending = [(new, new.send_join(version))]
            scene.wait_state(group, "PreparingRebalance")
            pending += [(m, m.send_join(version)) for m in members]
            answers = [m.joined(p) for m, p in pending]
            if first is not None:
                scene.note(f"{new.label} joins", first)
        else:
            answers = new.join_new(version)
            for answer in answers[:-1]:
                scene.note(f"{new.label} joins", answer)
            answers = answers[-1:]
        for m, answer in zip([new, *members], answers, strict=True):
            scene.note(f"{m.label} {'joins' if m is new else 'rejoins'}", answer)
        if any(a["error_code"] != 0 for a in answers):
            raise SetupError(f"join: {answers}")
        members.append(new)
        leader, followers = members[0], members[1:]
        waiting = [(m, m.send_sync(sync_version)) for m in followers]
        assignments = {m.member_id: assignment_for(m) for m in members}
        synced = [(leader, leader.sync(sync_version, assignments))]
        synced += [(m, m.recv(p)) for m, p in waiting]
        for m, answer in synced:
            scene.note(f"{m.label} syncs", answer)
        if any(error_of(answer) != 0 for _, answer in synced):
            raise SetupError(f"sync: {synced}")
    return members


def offset_commit_body(
    group: str,
    offsets: dict[str, dict[int, int]],
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str | None = "meta",
    retention_ms: int = -1,
) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": instance_id,
        "retention_time": retention_ms,
        "topics": [
            {
                "name": name,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": o,
                        "committed_leader_epoch": -1,
                        "committed_metadata": metadata,
                    }
                    for p, o in parts.items()
                ],
            }
            for name, parts in offsets.items()
        ],
    }


def offset_fetch_body(
    group: str, topics: dict[str, list[int]] | None, require_stable: bool = False
) -> dict[str, Any]:
    """v1-v7 name one group, v8+ a list (make() keeps what the version has)."""
    named = (
        None
        if topics is None
        else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    )
    return {
        "group_id": group,
        "topics": named,
        "groups": [{"group_id": group, "topics": named}],
        "require_stable": require_stable,
    }


def find_coordinator_scenarios() -> None:
    def case(version: int, keys: list[str], key_type: int = 0) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            side.fixture("coordinator", coordinator_ready)
            body = {"key": keys[0] if keys else "", "key_type": key_type, "coordinator_keys": keys}
            answer = ask(side, FIND_COORDINATOR, version, body)
            deadline = time.monotonic() + 15  # the transaction coordinator starts on first use
            while time.monotonic() < deadline and (
                error_of(answer) in RETRIABLE_COORDINATOR
                or isinstance(answer, dict)
                and any(
                    c["error_code"] in RETRIABLE_COORDINATOR for c in answer.get("coordinators", [])
                )
            ):
                time.sleep(0.2)
                answer = ask(side, FIND_COORDINATOR, version, body)
            return answer

        return run

    note = "retried while COORDINATOR_NOT_AVAILABLE/LOAD_IN_PROGRESS"
    for v in range(4):
        add(f"find_coordinator.v{v}.group", case(v, [group_id("fc")]))
        add(f"find_coordinator.v{v}.empty_key", case(v, [""]))
    for v in (1, 3):
        add(f"find_coordinator.v{v}.transaction", case(v, ["fc-txn"], 1), note)
        add(f"find_coordinator.v{v}.invalid_key_type", case(v, [group_id("fc")], 7))
    add(
        "find_coordinator.v4.groups",
        case(4, [group_id("fc"), group_id("fc2"), ""]),
        "keys [~fc, ~fc2, '']",
    )
    add("find_coordinator.v4.transactions", case(4, ["fc-txn", "fc-txn2"], 1), note)
    add("find_coordinator.v4.invalid_key_type", case(4, [group_id("fc")], 7))
    add("find_coordinator.v4.no_keys", case(4, []), "coordinator_keys []")


def join_group_scenarios() -> None:
    def first_join(version: int, instance_id: str | None = None) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                label = f"join-{'static' if instance_id else 'new'}-v{version}"
                a = sc.member("A", group_id(label), instance_id=instance_id)
                answers = a.join_new(version)
                return sc.out(
                    {
                        "joins": answers,
                        "member_id_format": member_id_format(a.member_id),
                        "described": sc.describe(a.group),
                    }
                )

        return run

    for v in (4, 6, 7, 9):
        add(
            f"join_group.v{v}.member_id_required",
            first_join(v),
            "first join with member_id '' answers MEMBER_ID_REQUIRED; rejoin with the id",
        )
    for v in (0, 1, 3):
        add(f"join_group.v{v}.direct", first_join(v), "v0-v3: no MEMBER_ID_REQUIRED")
    add("join_group.v5.static", first_join(5, "static-1"), "group_instance_id set: joins at once")
    add("join_group.v9.static", first_join(9, "static-1"))

    def bad_join(
        version: int, label: str, group: str | None = None, form: bool = False, **changes: Any
    ) -> Callable[[Side], Any]:
        """A join that should fail; with form=True into a Stable group of one member A."""

        def run(side: Side) -> Any:
            with Scene(side) as sc:
                name = group_id(f"join-{label}-v{version}") if group is None else group
                if form:
                    form_group(sc, f"join-{label}-v{version}")
                b = sc.member("B", name)
                out: dict[str, Any] = {"join": b.join(version, **changes)}
                if name:
                    out["described"] = sc.describe(name)
                return sc.out(out)

        return run

    for v in (1, 5, 9):
        add(
            f"join_group.v{v}.session_timeout_too_small",
            bad_join(v, "small", session_timeout=5999),
            "session_timeout 5999 < group.min.session.timeout.ms 6000",
        )
    add(
        "join_group.v9.session_timeout_too_large",
        bad_join(9, "large", session_timeout=1_800_001),
        "session_timeout 1800001 > group.max.session.timeout.ms 1800000",
    )
    add(
        "join_group.v9.session_timeout_min",
        bad_join(9, "min", session_timeout=6000),
        "session_timeout 6000 (the minimum) is accepted",
    )
    for v in (0, 9):
        add(f"join_group.v{v}.empty_group_id", bad_join(v, "empty", group=""))
    add("join_group.v9.empty_protocol_type", bad_join(9, "noptype", protocol_type=""))
    add("join_group.v9.no_protocols", bad_join(9, "noprot", protocols=[]))
    add(
        "join_group.v9.inconsistent_protocol_type",
        bad_join(9, "ptype", form=True, protocol_type="connect"),
        "B joins with protocol_type connect a Stable consumer group of A",
    )
    add(
        "join_group.v9.no_common_protocol",
        bad_join(9, "proto", form=True, protocols=[{"name": "roundrobin", "metadata": b""}]),
        "B offers only roundrobin to a group using range",
    )
    add(
        "join_group.v3.inconsistent_protocol_type",
        bad_join(3, "ptype", form=True, protocol_type="connect"),
    )
    add("join_group.v9.unknown_member_id_new_group", bad_join(9, "unk", member_id="nobody"))
    add(
        "join_group.v9.unknown_member_id",
        bad_join(9, "unk2", form=True, member_id="nobody"),
        "member_id 'nobody' into a Stable group",
    )

    def rejoin_leader(side: Side) -> Any:
        with Scene(side) as sc:
            [a] = form_group(sc, "join-rejoin")
            again = a.join(9)
            return sc.out({"rejoin": again, "described": sc.describe(a.group)})

    add("join_group.v9.leader_rejoins", rejoin_leader, "the only member rejoins a Stable group")

    def static_replaced(side: Side) -> Any:
        with Scene(side) as sc:
            [a] = form_group(sc, "join-fenced", instance_id="inst-1")
            old_id, old_gen = a.member_id, a.generation
            a2 = sc.member("A2", a.group, instance_id="inst-1")
            out: dict[str, Any] = {"join_same_instance": a2.join(9)}
            out["new_member_id_differs"] = a2.member_id != old_id
            out["heartbeat_old_member"] = a.heartbeat(4)
            out["heartbeat_old_member_no_instance"] = a.heartbeat(4, group_instance_id=None)
            out["heartbeat_new_member"] = a2.heartbeat(4)
            out["sync_old_member"] = a.sync(5)
            out["commit_old_member"] = a.commit({topic("grp"): {0: 1}})
            out["commit_old_member_v6"] = a.commit({topic("grp"): {0: 1}}, version=6)
            out["leave_old_member_v3"] = a.ask(
                LEAVE_GROUP,
                3,
                {
                    "group_id": a.group,
                    "members": [{"member_id": old_id, "group_instance_id": "inst-1"}],
                },
            )
            out["old_generation"] = old_gen
            out["described"] = sc.describe(a.group)
            return sc.out(out)

    add(
        "join_group.v9.static_member_replaced",
        static_replaced,
        "A (instance inst-1) Stable; A2 joins with inst-1 and member ''; A's old id is fenced",
    )

    def long_group(length: int) -> Callable[[Side], Any]:
        return lambda side: huge_group(side, length)

    def huge_group(side: Side, length: int) -> Any:
        with Scene(side) as sc:
            name = RUN + "g" * (length - len(RUN))
            a = sc.member("A", name)
            out: dict[str, Any] = {}
            try:
                out["joins"] = a.join_new(9)
                out["sync"] = a.sync(5, {a.member_id: b"x"})
            except SetupError as exc:
                out["failed"] = str(exc)
            out["connection_after"] = "closed" if a.client._eof or a.client.closed(0.3) else "open"
            out["find_coordinator_v3"] = ask_and_watch(
                side, FIND_COORDINATOR, 3, {"key": name, "key_type": 0}
            )
            out["commit_v8"] = ask_and_watch(
                side, OFFSET_COMMIT, 8, offset_commit_body(name, {topic("grp"): {0: 1}})
            )
            out["fetch_v8"] = ask_and_watch(side, OFFSET_FETCH, 8, offset_fetch_body(name, None))
            out["describe_v5"] = ask_and_watch(side, DESCRIBE_GROUPS, 5, {"groups": [name]})
            return sc.out(out)

    for length in (32_767, 32_768, 300_000):
        add(
            f"join_group.v9.group_id_{length}",
            long_group(length),
            f"a {length}-character group id (compact string): join, sync, then other APIs",
        )


def sync_group_scenarios() -> None:
    def round_trip(join_version: int, sync_version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                members = form_group(
                    sc, f"round-j{join_version}-s{sync_version}", 2, join_version, sync_version
                )
                return sc.out(
                    {"transcript": sc.transcript, "described": sc.describe(members[0].group)}
                )

        return run

    for jv, sv in ((0, 0), (2, 1), (5, 3), (6, 4), (9, 5)):
        add(
            f"sync_group.v{sv}.round",
            round_trip(jv, sv),
            f"JoinGroup v{jv}: A alone (generation 1), B joins, A rejoins (2); SyncGroup v{sv}",
        )

    def bad_sync(version: int, label: str, **changes: Any) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                a, b = form_group(sc, f"sync-{label}-v{version}", 2, sync_version=version)
                request = dict(changes)  # relative generations; the dict is shared by both sides
                if "generation_id" in request:
                    request["generation_id"] += b.generation
                out = {"sync": b.sync(version, **request)}
                out["described_after"] = sc.describe(a.group)
                out["heartbeat_b_after"] = b.heartbeat(4)
                out["sync_b_after"] = b.sync(version)
                return sc.out(out)

        return run

    for v in (0, 5):
        add(
            f"sync_group.v{v}.stale_generation",
            bad_sync(v, "stale", generation_id=-1),
            "B syncs with generation-1 in a Stable group of A and B",
        )
        add(f"sync_group.v{v}.unknown_member", bad_sync(v, "unknown", member_id="nobody"))
    add("sync_group.v5.future_generation", bad_sync(5, "future", generation_id=1))
    add("sync_group.v5.wrong_protocol_type", bad_sync(5, "ptype", protocol_type="connect"))
    add("sync_group.v5.wrong_protocol_name", bad_sync(5, "pname", protocol_name="roundrobin"))
    add("sync_group.v5.null_protocol", bad_sync(5, "pnull", protocol_type=None, protocol_name=None))

    def unknown_group(side: Side) -> Any:
        with Scene(side) as sc:
            a = sc.member("A", group_id("sync-nogroup"))
            a.member_id, a.generation = "nobody", 1
            return sc.out(
                {
                    "sync": a.sync(5),
                    "sync_v0": a.sync(0),
                    "empty_group_id": sc.member("B", "").sync(5),
                }
            )

    add("sync_group.v5.unknown_group", unknown_group)

    def during_rebalance(side: Side) -> Any:
        with Scene(side) as sc:
            [a] = form_group(sc, "sync-rebalance")
            b = sc.member("B", a.group)
            b.join(9)
            pending = b.send_join(9)
            sc.wait_state(a.group, "PreparingRebalance")
            out = {"sync_a": a.sync(5, {a.member_id: b"again"}), "heartbeat_a": a.heartbeat(4)}
            out["commit_a"] = a.commit({topic("grp"): {0: 3}})
            out["described"] = sc.describe(a.group)
            rejoin = a.join(9)
            out["rejoin_a"], out["join_b"] = rejoin, b.joined(pending)
            return sc.out(out)

    add(
        "sync_group.v5.during_rebalance",
        during_rebalance,
        "A Stable; B joins; A syncs, heartbeats and commits while PreparingRebalance, then rejoins",
    )

    def awaiting_sync(side: Side) -> Any:
        with Scene(side) as sc:
            a = sc.member("A", group_id("sync-awaiting"))
            a.join_new(9)
            out = {"heartbeat": a.heartbeat(4), "commit": a.commit({topic("grp"): {0: 4}})}
            out["described"] = sc.describe(a.group)
            out["fetch"] = sc.fetch_offsets(a.group, None)
            out["sync"] = a.sync(5, {a.member_id: b"mine"})
            out["described_after_sync"] = sc.describe(a.group)
            return sc.out(out)

    add(
        "sync_group.v5.awaiting_sync",
        awaiting_sync,
        "after the join, before the leader syncs: Heartbeat and OffsetCommit (CompletingRebalance)",
    )

    def follower_again(side: Side) -> Any:
        with Scene(side) as sc:
            _, b = form_group(sc, "sync-again", 2)
            return sc.out({"sync_b_again": b.sync(5), "sync_b_v0_again": b.sync(0)})

    add("sync_group.v5.resync_stable", follower_again, "B syncs again in a Stable group")


def heartbeat_scenarios() -> None:
    def case(version: int, label: str, **changes: Any) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                [a] = form_group(sc, f"hb-{label}-v{version}")
                request = dict(changes)  # relative generations; the dict is shared by both sides
                if "generation_id" in request:
                    request["generation_id"] += a.generation
                out = {"heartbeat": a.heartbeat(version, **request)}
                out["described_after"] = sc.describe(a.group)
                return sc.out(out)

        return run

    for v in (0, 4):
        add(f"heartbeat.v{v}.stable", case(v, "ok"))
        add(f"heartbeat.v{v}.unknown_member", case(v, "unknown", member_id="nobody"))
        add(f"heartbeat.v{v}.stale_generation", case(v, "stale", generation_id=-1))
    add("heartbeat.v4.future_generation", case(4, "future", generation_id=1))
    add(
        "heartbeat.v4.unknown_instance_id",
        case(4, "inst", group_instance_id="nobody-inst"),
        "a dynamic member's heartbeat naming a group_instance_id",
    )
    add("heartbeat.v4.unknown_group", case(4, "nogroup", group_id=group_id("hb-none")))
    add("heartbeat.v4.empty_group_id", case(4, "emptyid", group_id=""))

    def rebalancing(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                [a] = form_group(sc, f"hb-rebalance-v{version}")
                b = sc.member("B", a.group)
                b.join(9)
                pending = b.send_join(9)
                sc.wait_state(a.group, "PreparingRebalance")
                out = {"heartbeat_a": a.heartbeat(version)}
                out["heartbeat_b_waiting"] = b.heartbeat(4, fresh=True)
                out["rejoin_a"] = a.join(9)
                out["join_b"] = b.joined(pending)
                out["heartbeat_a_new_generation"] = a.heartbeat(version)
                out["heartbeat_a_old_generation"] = a.heartbeat(
                    version, generation_id=a.generation - 1
                )
                return sc.out(out)

        return run

    for v in (0, 4):
        add(
            f"heartbeat.v{v}.rebalance_in_progress",
            rebalancing(v),
            "A Stable; B joins; A heartbeats; A rejoins; heartbeats in CompletingRebalance",
        )


def leave_group_scenarios() -> None:
    def single(version: int, label: str, **changes: Any) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                a, b = form_group(sc, f"leave-{label}-v{version}", 2)
                body = {"group_id": b.group, "member_id": b.member_id, **changes}
                out = {"leave": b.ask(LEAVE_GROUP, version, body)}
                out["described_after"] = sc.describe(a.group)
                out["heartbeat_a_after"] = a.heartbeat(4)
                out["heartbeat_b_after"] = b.heartbeat(4)
                return sc.out(out)

        return run

    for v in (0, 2):
        add(f"leave_group.v{v}.member", single(v, "ok"), "B leaves a Stable group of A and B")
        add(f"leave_group.v{v}.unknown_member", single(v, "unknown", member_id="nobody"))
        add(f"leave_group.v{v}.unknown_group", single(v, "nogroup", group_id=group_id("none")))

    def batch(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                a, b = form_group(sc, f"leave-batch-v{version}", 2)
                s = form_group_static(sc, a, "S", "inst-s")
                leaving = [
                    {"member_id": a.member_id, "group_instance_id": None, "reason": "bye"},
                    {"member_id": "", "group_instance_id": "inst-s", "reason": None},
                    {"member_id": "nobody", "group_instance_id": None, "reason": None},
                    {"member_id": "", "group_instance_id": "no-such-instance", "reason": None},
                ]
                out = {
                    "leave": b.ask(LEAVE_GROUP, version, {"group_id": a.group, "members": leaving})
                }
                out["described_after"] = sc.describe(a.group)
                out["heartbeat_b_after"] = b.heartbeat(4)
                out["heartbeat_s_after"] = s.heartbeat(4)
                return sc.out(out)

        return run

    for v in (3, 4, 5):
        add(
            f"leave_group.v{v}.batch",
            batch(v),
            "A (by member id), S (by instance id), unknown member id, unknown instance id",
        )

    def fenced(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                [a] = form_group(sc, f"leave-fenced-v{version}", instance_id="inst-f")
                leaving = [{"member_id": "wrong-id", "group_instance_id": "inst-f"}]
                out = {
                    "leave": a.ask(LEAVE_GROUP, version, {"group_id": a.group, "members": leaving})
                }
                out["described_after"] = sc.describe(a.group)
                return sc.out(out)

        return run

    def last_member(side: Side) -> Any:
        with Scene(side) as sc:
            [a] = form_group(sc, "leave-last")
            body = {"group_id": a.group, "members": [{"member_id": a.member_id}]}
            out = {"leave": a.ask(LEAVE_GROUP, 5, body), "described_after": sc.describe(a.group)}
            out["next_join"] = sc.member("B", a.group).join_new(9)
            return sc.out(out)

    add(
        "leave_group.v5.last_member",
        last_member,
        "the only member of a Stable group leaves; then a new member joins (generation?)",
    )
    add("leave_group.v3.fenced_instance", fenced(3), "instance inst-f with another member id")
    add("leave_group.v5.fenced_instance", fenced(5))

    def batch_unknown_group(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            body = {"group_id": group_id("leave-none"), "members": [{"member_id": "x"}]}
            return ask(side, LEAVE_GROUP, version, body)

        return run

    add("leave_group.v3.unknown_group", batch_unknown_group(3))
    add("leave_group.v5.unknown_group", batch_unknown_group(5))
    add(
        "leave_group.v5.empty_members",
        lambda side: ask(
            side, LEAVE_GROUP, 5, {"group_id": group_id("leave-empty"), "members": []}
        ),
    )


def form_group_static(sc: Scene, leader: Member, label: str, instance_id: str) -> Member:
    """Adds a static member to the Stable group `leader` leads (all rejoin, all sync)."""
    others = [m for m in sc.members if m.group == leader.group and m.generation >= 0]
    s = sc.member(label, leader.group, instance_id=instance_id)
    pending = [(s, s.send_join(9))]
    sc.wait_state(leader.group, "PreparingRebalance")
    pending += [(m, m.send_join(9)) for m in others]
    answers = [m.joined(p) for m, p in pending]
    if any(a["error_code"] != 0 for a in answers):
        raise SetupError(f"static join: {answers}")
    everyone = [*others, s]
    waiting = [(m, m.send_sync(5)) for m in everyone if m is not leader]
    leader.sync(5, {m.member_id: assignment_for(m) for m in everyone})
    for m, p in waiting:
        if error_of(m.recv(p)) != 0:
            raise SetupError("static sync failed")
    return s


def committed(sc: Scene, label: str, offsets: dict[str, dict[int, int]] | None = None) -> str:
    """An Empty group holding offsets committed standalone (generation -1, member '')."""
    name = group_id(label)
    offsets = offsets or {topic("grp"): {0: 10, 1: 20}}
    answer = sc.ask(OFFSET_COMMIT, 9, offset_commit_body(name, offsets, metadata=f"meta-{label}"))
    if not isinstance(answer, dict) or any(
        p["error_code"] for t in answer["topics"] for p in t["partitions"]
    ):
        raise SetupError(f"OffsetCommit: {answer}")
    return name
