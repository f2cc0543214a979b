"""Consumer groups' offsets and listings: OffsetCommit, OffsetFetch, DescribeGroups,
ListGroups, DeleteGroups and OffsetDelete."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .constants import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
)
from .groups import Scene, committed, form_group, group_id, offset_commit_body, offset_fetch_body
from .talk import Side, add, ask, topic


def offset_commit_scenarios() -> None:
    def standalone(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                name = group_id(f"commit-v{version}")
                body = offset_commit_body(
                    name, {topic("grp"): {0: 10, 1: 20}}, metadata=f"meta-v{version}"
                )
                out = {"commit": sc.ask(OFFSET_COMMIT, version, body)}
                out["fetch_v1"] = sc.fetch_offsets(name, {topic("grp"): [0, 1]}, 1)
                out["fetch_v8_all"] = sc.fetch_offsets(name, None, 8)
                out["described"] = sc.describe(name)
                return sc.out(out)

        return run

    for v in (2, 3, 5, 7, 8, 9):
        add(
            f"offset_commit.v{v}.standalone",
            standalone(v),
            "generation -1, member '' on a new group, metadata 'meta-v<N>'; read back",
        )

    def mixed(
        version: int, label: str, offsets: Callable[[], dict[str, dict[int, Any]]]
    ) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                name = group_id(f"commit-{label}-v{version}")
                body = offset_commit_body(name, {})
                body["topics"] = [
                    {
                        "name": t,
                        "partitions": [
                            {
                                "partition_index": p,
                                "committed_offset": o[0] if isinstance(o, tuple) else o,
                                "committed_leader_epoch": -1,
                                "committed_metadata": o[1] if isinstance(o, tuple) else "m",
                            }
                            for p, o in parts.items()
                        ],
                    }
                    for t, parts in offsets().items()
                ]
                out = {"commit": sc.ask(OFFSET_COMMIT, version, body)}
                answer = sc.fetch_offsets(name, None, 8)
                if isinstance(answer, dict):  # long metadata strings: compare, do not print
                    for g in answer["groups"]:
                        for t in g["topics"]:
                            for p in t["partitions"]:
                                if p["metadata"] and len(p["metadata"]) > 100:
                                    p["metadata"] = (
                                        f"{len(p['metadata'])} x 'a'"
                                        if set(p["metadata"]) == {"a"}
                                        else "?"
                                    )
                out["fetch_all_after"] = answer
                out["described"] = sc.describe(name)
                return sc.out(out)

        return run

    def unknown_topic() -> dict[str, dict[int, Any]]:
        return {topic("grp"): {0: 5}, topic("commit-missing"): {0: 1}}

    def unknown_partition() -> dict[str, dict[int, Any]]:
        return {topic("grp"): {0: 5, 7: 1}}

    def long_metadata() -> dict[str, dict[int, Any]]:
        return {topic("grp"): {0: (1, "a" * 4096), 1: (2, "a" * 4097)}}

    def null_metadata() -> dict[str, dict[int, Any]]:
        return {topic("grp"): {0: (1, None), 1: (2, "")}}

    def negative_offset() -> dict[str, dict[int, Any]]:
        return {topic("grp"): {0: -1, 1: -5}}

    for v in (2, 9):
        add(
            f"offset_commit.v{v}.unknown_topic",
            mixed(v, "notopic", unknown_topic),
            "~grp/0 and a nonexistent topic in one request",
        )
        add(
            f"offset_commit.v{v}.unknown_partition",
            mixed(v, "nopart", unknown_partition),
            "~grp partitions 0 and 7 (of 2)",
        )
        add(
            f"offset_commit.v{v}.metadata_too_large",
            mixed(v, "bigmeta", long_metadata),
            "metadata of 4096 characters (partition 0) and 4097 (partition 1)",
        )
    add(
        "offset_commit.v9.null_metadata",
        mixed(9, "nullmeta", null_metadata),
        "metadata null (partition 0) and '' (1)",
    )
    add(
        "offset_commit.v9.negative_offset",
        mixed(9, "negative", negative_offset),
        "offsets -1 and -5",
    )

    def member_commit(
        version: int, label: str, delta: int | None = None, **changes: Any
    ) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                [a] = form_group(sc, f"commit-{label}-v{version}")
                request = dict(changes)
                if delta is not None:
                    request["generation_id_or_member_epoch"] = a.generation + delta
                out = {"commit": a.commit({topic("grp"): {0: 7}}, version, **request)}
                out["fetch_after"] = sc.fetch_offsets(a.group, None, 8)
                out["described"] = sc.describe(a.group)
                return sc.out(out)

        return run

    for v in (2, 5, 9):
        add(
            f"offset_commit.v{v}.member",
            member_commit(v, "member"),
            "the member of a Stable group commits with its generation",
        )
        add(
            f"offset_commit.v{v}.stale_generation",
            member_commit(v, "stale", delta=-1),
            "generation-1 in a Stable group",
        )
        add(f"offset_commit.v{v}.unknown_member", member_commit(v, "unknown", member_id="nobody"))
    add("offset_commit.v9.future_generation", member_commit(9, "future", delta=1))
    add(
        "offset_commit.v9.standalone_into_active_group",
        member_commit(9, "intoactive", generation_id_or_member_epoch=-1, member_id=""),
        "generation -1, member '' to a Stable group",
    )
    add(
        "offset_commit.v9.unknown_instance_id",
        member_commit(9, "inst", group_instance_id="nobody-inst"),
        "a dynamic member's commit naming a group_instance_id",
    )

    def unknown_group_with_generation(side: Side) -> Any:
        with Scene(side) as sc:
            name = group_id("commit-gen-nogroup")
            body = offset_commit_body(name, {topic("grp"): {0: 1}}, generation=3, member_id="m")
            out = {"commit": sc.ask(OFFSET_COMMIT, 9, body)}
            out["described"] = sc.describe(name)
            body = offset_commit_body(name, {topic("grp"): {0: 1}}, generation=-1, member_id="m")
            out["commit_generation_minus1_member_m"] = sc.ask(OFFSET_COMMIT, 9, body)
            out["fetch_after"] = sc.fetch_offsets(name, None, 8)
            return sc.out(out)

    add(
        "offset_commit.v9.unknown_group_with_generation",
        unknown_group_with_generation,
        "generation 3, member 'm' to a group that does not exist; then generation -1, member 'm'",
    )

    def empty_group_id(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                body = offset_commit_body("", {topic("grp-other"): {0: version}})
                out = {"commit": sc.ask(OFFSET_COMMIT, version, body)}
                out["fetch"] = sc.fetch_offsets("", {topic("grp-other"): [0]})
                out["described"] = sc.describe("")
                for step in ("delete_groups", "delete_groups_again"):
                    out[step] = sc.ask(DELETE_GROUPS, 2, {"groups_names": [""]})
                out["fetch_after_delete"] = sc.fetch_offsets("", {topic("grp-other"): [0]})
                return sc.out(out)

        return run

    for v in (2, 9):
        add(
            f"offset_commit.v{v}.empty_group_id",
            empty_group_id(v),
            "group id '': commit, fetch, DescribeGroups, DeleteGroups twice, fetch",
        )

    def retention(side: Side) -> Any:
        with Scene(side) as sc:
            short, default = group_id("commit-retention-1000"), group_id("commit-retention-default")
            out = {}
            for name, ms in ((short, 1000), (default, -1)):
                body = offset_commit_body(name, {topic("grp"): {0: 11}}, retention_ms=ms)
                out[f"commit_{ms}"] = sc.ask(OFFSET_COMMIT, 2, body)
            out["fetch_at_once"] = sc.fetch_offsets(short, None, 8)
            time.sleep(2.6)  # retention 1 s, expiry checked every second
            out["fetch_short_after_2.6s"] = sc.fetch_offsets(short, None, 8)
            out["fetch_default_after_2.6s"] = sc.fetch_offsets(default, None, 8)
            out["described_after"] = sc.describe(short, default)
            return sc.out(out)

    add(
        "offset_commit.v2.retention_time",
        retention,
        "standalone commits with retention_time 1000 ms and -1; offsets.retention.check.interval.ms"
        " is 1000 (SKIFF_OFFSETS_RETENTION_CHECK_INTERVAL_MS for Skiff)",
    )


def offset_fetch_scenarios() -> None:
    def setup(sc: Scene, label: str) -> str:
        return committed(sc, label, {topic("grp"): {0: 10}, topic("grp-other"): {0: 30}})

    def named(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                name = setup(sc, f"fetch-named-v{version}")
                wanted = {
                    topic("grp"): [0, 1, 5],
                    topic("grp-other"): [0],
                    topic("fetch-missing"): [0],
                }
                return sc.out(sc.fetch_offsets(name, wanted, version))

        return run

    for v in (1, 2, 5, 6, 7, 8, 9):
        add(
            f"offset_fetch.v{v}.named",
            named(v),
            "committed ~grp/0 and ~grp-other/0; asks ~grp/0,1,5, ~grp-other/0, a missing topic",
        )

    def all_partitions(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                name = setup(sc, f"fetch-all-v{version}")
                return sc.out(sc.fetch_offsets(name, None, version))

        return run

    for v in (2, 5, 6, 8):
        add(f"offset_fetch.v{v}.all", all_partitions(v), "topics null")

    def unknown_group(version: int, topics: dict[str, list[int]] | None) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                name = group_id(f"fetch-none-v{version}")
                return sc.out(
                    {
                        "fetch": sc.fetch_offsets(name, topics, version),
                        "described": sc.describe(name),
                    }
                )

        return run

    for v in (1, 5, 8):
        add(f"offset_fetch.v{v}.unknown_group_named", unknown_group(v, {topic("grp"): [0]}))
    for v in (2, 8):
        add(f"offset_fetch.v{v}.unknown_group_all", unknown_group(v, None))

    def several_groups(side: Side) -> Any:
        with Scene(side) as sc:
            one = setup(sc, "fetch-multi-1")
            two = setup(sc, "fetch-multi-2")
            body = {
                "groups": [
                    {"group_id": one, "topics": None},
                    {
                        "group_id": two,
                        "topics": [{"name": topic("grp"), "partition_indexes": [0, 1]}],
                    },
                    {"group_id": group_id("fetch-multi-none"), "topics": None},
                    {
                        "group_id": group_id("fetch-multi-none2"),
                        "topics": [{"name": topic("grp"), "partition_indexes": [0]}],
                    },
                ],
                "require_stable": False,
            }
            return sc.out(sc.ask(OFFSET_FETCH, 8, body))

    add(
        "offset_fetch.v8.several_groups",
        several_groups,
        "two committed groups (all; named), two unknown ones (all; named)",
    )

    def require_stable(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                name = setup(sc, f"fetch-stable-v{version}")
                body = offset_fetch_body(name, {topic("grp"): [0, 1]}, require_stable=True)
                return sc.out(sc.ask(OFFSET_FETCH, version, body))

        return run

    for v in (7, 8):
        add(
            f"offset_fetch.v{v}.require_stable",
            require_stable(v),
            "no pending transactional offsets",
        )

    def active(side: Side) -> Any:
        with Scene(side) as sc:
            [a] = form_group(sc, "fetch-active")
            a.commit({topic("grp"): {1: 42}})
            return sc.out(
                {
                    "all": sc.fetch_offsets(a.group, None, 8),
                    "v1_named": sc.fetch_offsets(a.group, {topic("grp"): [0, 1]}, 1),
                }
            )

    add("offset_fetch.v8.stable_group", active, "the member of a Stable group committed ~grp/1")

    add(
        "offset_fetch.v8.empty_group_id",
        lambda side: ask(side, OFFSET_FETCH, 8, offset_fetch_body("", None)),
    )
    add(
        "offset_fetch.v5.empty_group_id",
        lambda side: ask(side, OFFSET_FETCH, 5, offset_fetch_body("", None)),
    )


def describe_groups_scenarios() -> None:
    def case(version: int, kind: str, authorized: bool = False) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                label = f"describe-{kind}-v{version}{'-auth' if authorized else ''}"
                if kind == "stable":
                    name = form_group(sc, label, 2)[0].group
                elif kind == "empty":
                    name = committed(sc, label)
                elif kind == "completing":  # joined, not synced
                    a = sc.member("A", group_id(label))
                    a.join_new(9)
                    name = a.group
                elif kind == "preparing":  # B waits for A to rejoin
                    [a] = form_group(sc, label)
                    b = sc.member("B", a.group)
                    b.join(9)
                    b.send_join(9)
                    sc.wait_state(a.group, "PreparingRebalance")
                    name = a.group
                elif kind == "dead":  # deleted
                    name = committed(sc, label)
                    sc.ask(DELETE_GROUPS, 2, {"groups_names": [name]})
                else:
                    name = group_id(label)
                body = {"groups": [name], "include_authorized_operations": authorized}
                return sc.out(sc.ask(DESCRIBE_GROUPS, version, body))

        return run

    for v in (0, 1, 3, 4, 5):
        add(f"describe_groups.v{v}.unknown", case(v, "unknown"))
        add(f"describe_groups.v{v}.empty", case(v, "empty"), "offsets committed standalone")
        add(f"describe_groups.v{v}.stable", case(v, "stable"), "A (leader) and B, synced")
    for v in (3, 5):
        for kind in ("unknown", "empty", "stable"):
            add(
                f"describe_groups.v{v}.{kind}.authorized_operations",
                case(v, kind, True),
                "include_authorized_operations true",
            )
    add("describe_groups.v5.completing_rebalance", case(5, "completing"), "A joined, not synced")
    add(
        "describe_groups.v5.preparing_rebalance",
        case(5, "preparing"),
        "A Stable, B joined and waits for A",
    )
    add("describe_groups.v5.deleted", case(5, "dead"), "an Empty group removed by DeleteGroups")

    def several(side: Side) -> Any:
        with Scene(side) as sc:
            stable = form_group(sc, "describe-several-stable")[0].group
            empty = committed(sc, "describe-several-empty")
            names = [stable, empty, group_id("describe-several-none"), ""]
            return sc.out(sc.ask(DESCRIBE_GROUPS, 5, {"groups": names}))

    add("describe_groups.v5.several", several, "Stable, Empty, unknown and '' in one request")
    add(
        "describe_groups.v0.empty_group_id",
        lambda side: ask(side, DESCRIBE_GROUPS, 0, {"groups": [""]}),
    )
    add("describe_groups.v5.no_groups", lambda side: ask(side, DESCRIBE_GROUPS, 5, {"groups": []}))


def listed_groups(side: Side) -> dict[str, str]:
    """Groups of every state for the ListGroups scenarios: kind -> group id."""
    sc = Scene(side)  # the members' connections stay open for the ListGroups scenarios
    stable = form_group(sc, "list-stable")[0].group
    other = form_group(sc, "list-connect", protocol_type="connect", protocols=[("worker", b"w")])[
        0
    ].group
    waiting = sc.member("A", group_id("list-completing"))
    waiting.join_new(9)
    return {
        "stable": stable,
        "connect": other,
        "completing": waiting.group,
        "empty": committed(sc, "list-empty"),
    }


def list_groups_scenarios() -> None:
    def case(
        version: int, states: tuple[str, ...] = (), types: tuple[str, ...] = ()
    ) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            ours = set(side.fixture("listed", listed_groups).values())
            body = {"states_filter": list(states), "types_filter": list(types)}
            answer = ask(side, LIST_GROUPS, version, body)
            if isinstance(answer, dict):  # groups of other scenarios come and go
                answer["groups"] = [g for g in answer["groups"] if g["group_id"] in ours]
            return answer

        return run

    for v in range(6):
        add(
            f"list_groups.v{v}.all",
            case(v),
            "groups of this scenario only: Stable consumer, "
            "Stable connect, CompletingRebalance, Empty",
        )
    for v in (4, 5):
        add(f"list_groups.v{v}.states_stable", case(v, ("Stable",)))
    add("list_groups.v4.states_lowercase", case(4, ("stable", "empty")))
    add("list_groups.v4.states_two", case(4, ("Empty", "CompletingRebalance")))
    add("list_groups.v4.states_unknown", case(4, ("NoSuchState",)))
    add("list_groups.v5.types_classic", case(5, (), ("classic",)))
    add("list_groups.v5.types_consumer", case(5, (), ("consumer",)))
    add("list_groups.v5.types_unknown", case(5, (), ("nope",)))


def delete_groups_scenarios() -> None:
    def mixed(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                stable = form_group(sc, f"delete-stable-v{version}")[0].group
                empty = committed(sc, f"delete-empty-v{version}")
                pending = sc.member("P", group_id(f"delete-pending-v{version}"))
                pending.join(9)  # MEMBER_ID_REQUIRED: a pending member only
                names = [stable, group_id(f"delete-none-v{version}"), empty, pending.group]
                out = {"delete": sc.ask(DELETE_GROUPS, version, {"groups_names": names})}
                out["described_after"] = sc.describe(*names)
                out["fetch_deleted_after"] = sc.fetch_offsets(empty, None, 8)
                out["delete_again"] = sc.ask(DELETE_GROUPS, version, {"groups_names": [empty]})
                out["commit_after"] = sc.ask(
                    OFFSET_COMMIT, 9, offset_commit_body(empty, {topic("grp"): {0: 3}})
                )
                out["fetch_after_new_commit"] = sc.fetch_offsets(empty, None, 8)
                return sc.out(out)

        return run

    for v in (0, 1, 2):
        add(
            f"delete_groups.v{v}.mixed",
            mixed(v),
            "Stable, unknown, Empty (offsets), one with only a pending member; then again",
        )


def offset_delete_scenarios() -> None:
    def subscribed(side: Side) -> Any:
        with Scene(side) as sc:
            [a] = form_group(sc, "odel-subscribed")
            a.commit({topic("grp"): {0: 1, 1: 2}, topic("grp-other"): {0: 3}})
            body = {
                "group_id": a.group,
                "topics": [
                    {"name": topic("grp"), "partitions": [{"partition_index": 0}]},
                    {"name": topic("grp-other"), "partitions": [{"partition_index": 0}]},
                    {"name": topic("odel-missing"), "partitions": [{"partition_index": 0}]},
                ],
            }
            out = {"delete": sc.ask(OFFSET_DELETE, 0, body)}
            out["fetch_after"] = sc.fetch_offsets(a.group, None, 8)
            return sc.out(out)

    add(
        "offset_delete.v0.subscribed",
        subscribed,
        "a Stable consumer group subscribed to ~grp: delete ~grp/0, ~grp-other/0, a missing topic",
    )

    def simple(label: str, make: str) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            with Scene(side) as sc:
                if make == "empty":
                    name = committed(sc, f"odel-{label}")
                elif make == "connect":
                    [a] = form_group(
                        sc, f"odel-{label}", protocol_type="connect", protocols=[("worker", b"w")]
                    )
                    a.commit({topic("grp"): {0: 1}})
                    name = a.group
                else:
                    name = group_id(f"odel-{label}")
                body = {
                    "group_id": name,
                    "topics": [
                        {
                            "name": topic("grp"),
                            "partitions": [{"partition_index": 0}, {"partition_index": 5}],
                        },
                    ],
                }
                out = {"delete": sc.ask(OFFSET_DELETE, 0, body)}
                out["fetch_after"] = sc.fetch_offsets(name, None, 8)
                out["described_after"] = sc.describe(name)
                return sc.out(out)

        return run

    add(
        "offset_delete.v0.empty_group",
        simple("empty", "empty"),
        "standalone offsets on ~grp/0,1: delete ~grp/0 and ~grp/5 (no such partition)",
    )
    add("offset_delete.v0.unknown_group", simple("none", "none"))
    add(
        "offset_delete.v0.non_consumer_group",
        simple("connect", "connect"),
        "a Stable group of protocol type connect",
    )
    add(
        "offset_delete.v0.empty_group_id",
        lambda side: ask(side, OFFSET_DELETE, 0, {"group_id": "", "topics": []}),
    )
