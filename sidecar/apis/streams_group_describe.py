"""StreamsGroupDescribe (key 89), v0-v1: a KIP-1071 streams group's state, epochs,
topology and members with their processes, endpoints, current and target tasks, from
the coordinating sidecar. Any other group is GROUP_ID_NOT_FOUND ("not a streams
group"), as from Kafka. Needs DESCRIBE on each group and on the topics of its topology
(else GROUP_ or TOPIC_AUTHORIZATION_FAILED for the group), as in Kafka. v1 names the
assignor; a topology description asked for is NOT_STORED (Skiff keeps none)."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.groups.coordinator import CoordinatorError
from sidecar.groups.streams_group import ASSIGNOR, InternalTopic, Tasks
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import checks
from sidecar.security.authorizer import Operation

API_KEY = 89
MIN_VERSION = 0
MAX_VERSION = 1


def _failed(group_id: str, code: str, message: str | None) -> dict[str, Any]:
    return {
        "error_code": errors.code(code),
        "error_message": message,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": 0,
        "assignment_epoch": 0,
        "topology": None,
        "members": [],
        "assignor_name": None,
    }


NOT_REQUESTED, NOT_STORED = 0, 1  # TopologyDescriptionStatus (v1)


def _topic_info(t: InternalTopic, partitions: int) -> dict[str, Any]:
    return {
        "name": t.name,
        "partitions": partitions,
        "replication_factor": t.replication,
        "topic_configs": [{"key": k, "value": v} for k, v in sorted(t.configs.items())],
    }


def _task_ids(tasks: Tasks) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": ps} for s, ps in sorted(tasks.items())]


def _assignment(active: Tasks, standby: Tasks) -> dict[str, Any]:
    return {
        "active_tasks": _task_ids(active),
        "standby_tasks": _task_ids(standby),
        "warmup_tasks": [],
    }


async def describe_one(broker: Broker, group_id: str) -> tuple[dict[str, Any], set[str]]:
    """The group's entry and the topics its topology names."""
    try:
        group = await broker.groups.describe(group_id)
    except CoordinatorError as exc:
        return _failed(group_id, exc.code, None), set()
    if group is None or group.streams is None:
        message = f"Group {group_id} not found."
        if group is not None:
            message = f"Group {group_id} is not a streams group."
        return _failed(group_id, "GROUP_ID_NOT_FOUND", message), set()
    sg = group.streams
    topology = None
    if sg.topology is not None:
        topology = {
            "epoch": sg.topology.epoch,
            "subtopologies": [
                {
                    "subtopology_id": s.subtopology_id,
                    "source_topics": s.source_topics,
                    "repartition_sink_topics": s.repartition_sinks,
                    # The configured counts, as Kafka describes them.
                    "state_changelog_topics": [
                        _topic_info(t, sg.tasks.get(s.subtopology_id, t.partitions))
                        for t in s.changelogs
                    ],
                    "repartition_source_topics": [
                        _topic_info(t, sg.partitions.get(t.name, t.partitions))
                        for t in s.repartition_sources
                    ],
                }
                for s in sg.topology.subtopologies
            ],
        }
    members = []
    for m in sg.members.values():
        members.append(
            {
                "member_id": m.member_id,
                "member_epoch": m.epoch,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "topology_epoch": m.topology_epoch,
                "process_id": m.process_id,
                "user_endpoint": (
                    {"host": m.endpoint[0], "port": m.endpoint[1]} if m.endpoint else None
                ),
                "client_tags": [{"key": k, "value": v} for k, v in sorted(m.client_tags.items())],
                "task_offsets": [],
                "task_end_offsets": [],
                "assignment": _assignment(m.assigned, m.standby),
                "target_assignment": _assignment(
                    sg.target.get(m.member_id, {}), sg.target_standby.get(m.member_id, {})
                ),
                "is_classic": False,
            }
        )
    entry = {
        "error_code": errors.NONE,
        "group_id": group_id,
        "group_state": sg.state,
        "group_epoch": sg.epoch,
        "assignment_epoch": sg.assignment_epoch,
        "topology": topology,
        "members": members,
        "assignor_name": ASSIGNOR,
    }
    return entry, sg.topology.topics() if sg.topology is not None else set()


async def _authorized(broker: Broker, request: Any, group_id: str) -> dict[str, Any]:
    if not checks.group_allowed(broker, request, Operation.DESCRIBE, group_id):
        return _failed(group_id, "GROUP_AUTHORIZATION_FAILED", None)
    entry, topics = await describe_one(broker, group_id)
    if topics - checks.allowed_topics(broker, request, Operation.DESCRIBE, topics):
        message = "The described group uses topics that the client is not authorized to describe."
        return _failed(group_id, "TOPIC_AUTHORIZATION_FAILED", message)
    if entry["error_code"] == errors.NONE and getattr(
        request.body, "include_topology_description", False
    ):
        entry["topology_description_status"] = NOT_STORED
    if request.body.include_authorized_operations:
        entry["authorized_operations"] = checks.authorized_operations(
            broker, request, checks.GROUP, group_id
        )
    return entry


async def handle(broker: Broker, request: Any) -> bytes:
    groups = [await _authorized(broker, request, g) for g in request.body.group_ids]
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": 0, "groups": groups}
    )
