"""StreamsGroupHeartbeat (key 88), v0-v1: KIP-1071's streams group protocol
(`group.protocol=streams` in Kafka Streams). A member joins (epoch 0) with its
topology, heartbeats at its epoch, leaves (-1) or, as a static member, steps out for a
while (-2); the broker configures the topology against the topics that exist, creates
the missing internal topics (changelogs, repartition topics) and assigns the tasks
(sidecar/groups/streams_group.py). Requests are checked as Kafka's
throwIfStreamsGroupHeartbeatRequestIsInvalid does. Needs READ on the group (else
GROUP_AUTHORIZATION_FAILED) and DESCRIBE on the topology's topics (else
TOPIC_AUTHORIZATION_FAILED); internal topics are created only with CREATE on the
cluster or the topic, as in Kafka. Skiff keeps no topology descriptions (KIP-1331:
like Kafka 4.4 without a topology description plugin, its default,
StreamsGroupTopologyDescriptionUpdate answers UNSUPPORTED_VERSION), so v1's
TopologyDescriptionRequired is always false."""

from __future__ import annotations

import logging
from typing import Any

from sidecar.broker import Broker
from sidecar.groups import streams_group as sgm
from sidecar.groups.coordinator import CoordinatorError, SgHeartbeat, SgResult
from sidecar.groups.group_configs import STREAMS_HEARTBEAT
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response, ms
from sidecar.queues.core import queue_store
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.validation.topic_configs import ConfigError, validate
from sidecar.validation.topic_names import invalid_name_reason

API_KEY = 88
MIN_VERSION = 0
MAX_VERSION = 1

ACCEPTABLE_RECOVERY_LAG = 10_000  # group.streams.acceptable.recovery.lag (Kafka's default)
TASK_OFFSET_INTERVAL_MS = 60_000  # group.streams.task.offset.interval.ms

log = logging.getLogger("skiff.groups")


def answer(code: int, message: str | None, member_id: str, epoch: int = 0) -> dict[str, Any]:
    """A heartbeat answer with nothing assigned: what errors carry, and what a success
    fills in."""
    return {
        "throttle_time": 0,
        "error_code": code,
        "error_message": message,
        "member_id": member_id,
        "member_epoch": epoch,
        "heartbeat_interval": 0,
        "task_offset_interval": 0,
        "status": [],
        "active_tasks": None,
        "standby_tasks": None,
        "warmup_tasks": None,
        "endpoint_information_epoch": 0,
        "partitions_by_user_endpoint": None,
    }


def _invalid(body: Any) -> str | None:
    """Kafka's request checks: the INVALID_REQUEST message, or None."""
    epoch = body.member_epoch
    tasks = (body.active_tasks, body.standby_tasks, body.warmup_tasks)
    if not body.group_id:
        return "GroupId can't be empty."
    if not body.member_id:
        return "MemberId can't be empty."
    if body.instance_id is not None and not body.instance_id:
        return "InstanceId can't be empty."
    if body.rack_id is not None and not body.rack_id:
        return "RackId can't be empty."
    if epoch == 0:
        if ms(body.rebalance_timeout) == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        if body.active_tasks:
            return "ActiveTasks must be empty when (re-)joining."
        if body.standby_tasks:
            return "StandbyTasks must be empty when (re-)joining."
        if body.warmup_tasks:
            return "WarmupTasks must be empty when (re-)joining."
        if body.topology is None:
            return "Topology must be non-null when (re-)joining."
        if any(s.source_topic_regex for s in body.topology.subtopologies):
            return "Regular expressions for source topics are not supported yet."
    elif epoch == sgm.STATIC_LEAVE_EPOCH:
        if body.instance_id is None:
            return "InstanceId can't be null."
    elif epoch < sgm.STATIC_LEAVE_EPOCH:
        return f"MemberEpoch is {epoch}, but must be greater than or equal to -2."
    if any(t is None for t in tasks) and any(t is not None for t in tasks):
        return "If one task-type is non-null, all must be non-null."
    return None


def _topology(body: Any) -> sgm.Topology | None:
    if body.topology is None:
        return None

    def internal(t: Any) -> sgm.InternalTopic:
        configs = {c.key: c.value for c in t.topic_configs}
        return sgm.InternalTopic(t.name, int(t.partitions), int(t.replication_factor), configs)

    subs = []
    for s in body.topology.subtopologies:
        sources = list(s.source_topics)
        rsources = [internal(t) for t in s.repartition_source_topics]
        groups = []
        for g in s.copartition_groups:
            names = [sources[i] for i in g.source_topics if 0 <= i < len(sources)]
            names += [
                rsources[i].name for i in g.repartition_source_topics if 0 <= i < len(rsources)
            ]
            groups.append(names)
        subs.append(
            sgm.Subtopology(
                s.subtopology_id,
                sources,
                rsources,
                list(s.repartition_sink_topics),
                [internal(t) for t in s.state_changelog_topics],
                groups,
            )
        )
    return sgm.Topology(int(body.topology.epoch), subs)


def _owned(body: Any) -> set[tuple[str, int]] | None:
    if body.active_tasks is None:
        return None
    return {(t.subtopology_id, int(p)) for t in body.active_tasks for p in t.partitions}


def _task_ids(tasks: sgm.Tasks) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": ps} for s, ps in sorted(tasks.items())]


def _topic_partitions(topology: sgm.Topology | None, tasks: sgm.Tasks) -> list[dict[str, Any]]:
    """The source topic partitions (repartition sources included) of some tasks."""
    out: dict[str, set[int]] = {}
    for s, ps in tasks.items():
        for topic in topology.source_topics(s) if topology is not None else []:
            out.setdefault(topic, set()).update(ps)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(out.items())]


async def _create_internal(
    broker: Broker, request: Any, to_create: dict[str, tuple[int, dict[str, str]]]
) -> list[str]:
    """Create the missing internal topics this principal may create; the names refused."""
    refused = []
    for name, (partitions, configs) in sorted(to_create.items()):
        if not checks.may_create_topic(broker, request, name):
            refused.append(name)
            continue
        problem = invalid_name_reason(name)
        if problem:
            log.warning("internal topic %r not created: %s", name, problem)
            continue
        try:
            overrides = validate(configs.items(), broker.store.topic_defaults)
        except ConfigError as exc:
            log.warning(
                "internal topic %r: configs %s refused (%s); creating without", name, configs, exc
            )
            overrides = {}
        if await broker.store.create_topic(name, partitions, overrides) is not None:
            log.info("created internal topic %r with %d partition(s)", name, partitions)
    return refused


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    result: SgResult | None = None
    topology = None
    if not checks.group_allowed(broker, request, Operation.READ, body.group_id):
        result = SgResult("GROUP_AUTHORIZATION_FAILED")
    if result is None:
        message = _invalid(body)
        if message is not None:
            result = SgResult("INVALID_REQUEST", message)
    if result is None:
        topology = _topology(body)
        if topology is not None:
            names = topology.topics()
            hidden = names - checks.allowed_topics(broker, request, Operation.DESCRIBE, names)
            if hidden:
                result = SgResult(
                    "TOPIC_AUTHORIZATION_FAILED",
                    f"Unauthorized topics: {', '.join(sorted(hidden))}",
                )
    if result is None and await queue_store(broker).exists(body.group_id):
        result = SgResult("GROUP_ID_NOT_FOUND", f"Group {body.group_id} is not a streams group.")
    if result is None:

        async def counts(names: set[str]) -> dict[str, int]:
            out = {}
            for name in sorted(names):
                info = await broker.store.get_topic(name)
                if info is not None:
                    out[name] = info.partitions
            return out

        endpoint = body.user_endpoint
        req = SgHeartbeat(
            member_id=body.member_id,
            epoch=body.member_epoch,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            rebalance_timeout_ms=ms(body.rebalance_timeout),
            topology=topology,
            owned=_owned(body),
            process_id=body.process_id,
            endpoint=(endpoint.host, int(endpoint.port)) if endpoint is not None else None,
            client_tags=(
                {kv.key: kv.value for kv in body.client_tags}
                if body.client_tags is not None
                else None
            ),
            endpoint_epoch=body.endpoint_information_epoch,
            client_id=request.header.client_id or "",
            client_host=f"/{request.peer_host}",
            shutdown=bool(body.shutdown_application),
        )
        try:
            result = await broker.groups.streams_heartbeat(body.group_id, req, counts)
        except CoordinatorError as exc:
            result = SgResult(exc.code)
    status = list(result.status or [])
    if result.error == "NONE" and result.to_create:
        refused = await _create_internal(broker, request, result.to_create)
        if refused:
            status = [
                (code, f"Unauthorized to CREATE on topics {', '.join(refused)}.")
                if code == sgm.MISSING_INTERNAL_TOPICS
                else (code, detail)
                for code, detail in status
            ]
    # An error answer carries no member id, as Kafka's (its default, "").
    member_id = (result.member_id or body.member_id) if result.error == "NONE" else ""
    data = answer(errors.code(result.error), result.message, member_id, result.epoch)
    if result.error == "NONE":
        if result.epoch not in (sgm.LEAVE_EPOCH, sgm.STATIC_LEAVE_EPOCH):
            data["heartbeat_interval"] = broker.groups.streams_config(
                body.group_id, STREAMS_HEARTBEAT
            )
            # v0's AcceptableRecoveryLagLegacy is 0 from Kafka 4.4; v1's is the config.
            data["acceptable_recovery_lag"] = ACCEPTABLE_RECOVERY_LAG if version >= 1 else 0
            data["task_offset_interval"] = TASK_OFFSET_INTERVAL_MS
            data["status"] = [{"status_code": c, "status_detail": d} for c, d in status]
            data["endpoint_information_epoch"] = result.endpoint_epoch
        if result.active is not None:
            data["active_tasks"] = _task_ids(result.active)
            data["standby_tasks"] = _task_ids(result.standby or {})
            data["warmup_tasks"] = []
        if result.endpoints is not None:
            data["partitions_by_user_endpoint"] = [
                {
                    "user_endpoint": {"host": host, "port": port},
                    "active_partitions": _topic_partitions(result.topology, active),
                    "standby_partitions": _topic_partitions(result.topology, standby),
                }
                for (host, port), active, standby in result.endpoints
            ]
    return encode_response(API_KEY, version, data)
