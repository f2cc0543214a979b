"""Streams groups (KIP-1071): StreamsGroupHeartbeat (88), StreamsGroupDescribe (89) and
StreamsGroupTopologyDescriptionUpdate (93), Kafka 4.x only. The request checks, unknown
groups and KIP-1331's answer without a topology description plugin compare in full. A
first join differs by design: Kafka 4.4 delays the first assignment (its
ASSIGNMENT_DELAYED status beside MISSING_SOURCE_TOPICS here), Skiff assigns at once
(docs/architecture.md "Streams groups")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .groups import group_id
from .talk import SetupError, Side, add, ask, topic

STREAMS_HEARTBEAT, STREAMS_DESCRIBE, TOPOLOGY_DESCRIPTION_UPDATE = 88, 89, 93
FIND_COORDINATOR = 10
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR = 14, 16


def _coordinator_ready(side: Side, group: str) -> None:
    """Kafka answers NOT_COORDINATOR until the group's coordinator partition is loaded,
    which a FindCoordinator for that group starts: wait for it (a describe of the group no
    longer answers so), as a client retries."""
    deadline = time.monotonic() + 30
    while True:
        found = ask(side, FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]})
        if isinstance(found, dict) and found["coordinators"][0]["error_code"] == 0:
            body = {"group_ids": [group], "include_authorized_operations": False}
            described = ask(side, STREAMS_DESCRIBE, 0, body)
            if isinstance(described, dict) and described["groups"][0]["error_code"] not in (
                NOT_COORDINATOR,
                COORDINATOR_LOAD_IN_PROGRESS,
            ):
                return
        if time.monotonic() > deadline:
            raise SetupError(f"no coordinator for {group}: {found}")
        time.sleep(0.2)


def _topology(source: str) -> dict[str, Any]:
    return {
        "epoch": 0,
        "subtopologies": [
            {
                "subtopology_id": "0",
                "source_topics": [source],
                "source_topic_regex": [],
                "state_changelog_topics": [],
                "repartition_sink_topics": [],
                "repartition_source_topics": [],
                "copartition_groups": [],
            }
        ],
    }


def _heartbeat(group: str, member: str, epoch: int, **changes: Any) -> dict[str, Any]:
    return {
        "group_id": group,
        "member_id": member,
        "member_epoch": epoch,
        "endpoint_information_epoch": 0,
        "rebalance_timeout": 30000 if epoch == 0 else -1,
        "topology": None,
        "active_tasks": [] if epoch == 0 else None,
        "standby_tasks": [] if epoch == 0 else None,
        "warmup_tasks": [] if epoch == 0 else None,
        "process_id": None,
        "user_endpoint": None,
        "client_tags": None,
        "task_offsets": None,
        "task_end_offsets": None,
        **changes,
    }


def streams_scenarios() -> None:
    missing = topic("streams-no-such-source")

    def heartbeat(version: int, label: str, **changes: Any) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            group = group_id(f"sg-{label}-v{version}")
            _coordinator_ready(side, group)
            return ask(side, STREAMS_HEARTBEAT, version, _heartbeat(group, "m1", **changes))

        return run

    for v in (0, 1):
        add(
            f"streams_group_heartbeat.v{v}.empty_member_id",
            heartbeat(v, "e", epoch=0, member_id=""),
        )
        add(f"streams_group_heartbeat.v{v}.join_without_topology", heartbeat(v, "t", epoch=0))
        add(
            f"streams_group_heartbeat.v{v}.no_rebalance_timeout",
            heartbeat(v, "r", epoch=0, topology=_topology(missing), rebalance_timeout=-1),
        )
        add(f"streams_group_heartbeat.v{v}.epoch_below_minus_two", heartbeat(v, "b", epoch=-3))
        add(f"streams_group_heartbeat.v{v}.unknown_group", heartbeat(v, "u", epoch=1))
        add(
            f"streams_group_heartbeat.v{v}.missing_source_topic",
            heartbeat(v, "m", epoch=0, topology=_topology(missing)),
            "member epoch, status MISSING_SOURCE_TOPICS and no tasks",
        )

    def describe(version: int) -> Callable[[Side], Any]:
        def run(side: Side) -> Any:
            _coordinator_ready(side, group_id("sg-unknown"))
            body: dict[str, Any] = {
                "group_ids": [group_id("sg-unknown")],
                "include_authorized_operations": False,
            }
            if version >= 1:
                body["include_topology_description"] = True
            return ask(side, STREAMS_DESCRIBE, version, body)

        return run

    for v in (0, 1):
        add(f"streams_group_describe.v{v}.unknown_group", describe(v))

    def description_update(side: Side) -> Any:
        _coordinator_ready(side, group_id("sg-describe"))
        body = {
            "group_id": group_id("sg-describe"),
            "member_id": "m1",
            "topology_epoch": 0,
            "topology_description": {"subtopologies": [], "global_stores": []},
        }
        return ask(side, TOPOLOGY_DESCRIPTION_UPDATE, 0, body)

    add(
        "streams_group_topology_description_update.v0",
        description_update,
        "no topology description plugin: UNSUPPORTED_VERSION",
    )
