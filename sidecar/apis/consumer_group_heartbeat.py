"""ConsumerGroupHeartbeat (key 68), v0-v1: KIP-848's consumer group protocol
(`group.protocol=consumer`). A member joins (epoch 0), heartbeats at its epoch, leaves
(-1) or, as a static member, steps out for a while (-2); the broker computes the
assignment (sidecar/groups/consumer_group.py) and each answer carries the member's
epoch and, when it changed, its partitions. Requests are checked as Kafka's
throwIfConsumerGroupHeartbeatRequestIsInvalid does. Needs READ on the group (else
GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic (else
TOPIC_AUTHORIZATION_FAILED), as in Kafka."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from sidecar.broker import Broker
from sidecar.groups.consumer_group import ASSIGNORS, LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from sidecar.groups.coordinator import CgHeartbeat, CgResult, CoordinatorError
from sidecar.groups.group_configs import HEARTBEAT
from sidecar.groups.topic_regex import regex_error, regex_matches
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response, ms
from sidecar.queues.core import queue_store
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage.topic_admin import topic_names

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1

# Kafka's internal topics, which a regex never matches (Skiff keeps none as topics today).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def partition_counter(broker: Broker) -> Callable[[set[str]], Awaitable[dict[str, int]]]:
    """The partition counts of those of some topics that exist (for the assignor)."""

    async def counts(names: set[str]) -> dict[str, int]:
        out = {}
        for name in sorted(names):
            info = await broker.store.get_topic(name)
            if info is not None:
                out[name] = info.partitions
        return out

    return counts


def _invalid(body: Any, version: int) -> CgResult | None:
    """Kafka's request checks: INVALID_REQUEST or UNSUPPORTED_ASSIGNOR with its text."""

    def bad(message: str) -> CgResult:
        return CgResult("INVALID_REQUEST", message)

    epoch = body.member_epoch
    regex = getattr(body, "subscribed_topic_regex", None)  # v1+
    if not body.group_id:
        return bad("GroupId can't be empty.")
    if version >= 1 and not body.member_id:
        return bad("MemberId can't be empty.")
    if body.rack_id is not None and not body.rack_id:
        return bad("RackId can't be empty.")
    if epoch == 0:
        if ms(body.rebalance_timeout) == -1:
            return bad("RebalanceTimeoutMs must be provided in first request.")
        if body.topic_partitions is None or body.topic_partitions:
            return bad("TopicPartitions must be empty when (re-)joining.")
        if not body.subscribed_topic_names and not regex:
            return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if body.instance_id is None:
            return bad("InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        return bad(f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    if regex:
        problem = regex_error(regex)
        if problem is not None:
            return CgResult(
                "INVALID_REGULAR_EXPRESSION",
                f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {problem}.",
            )
    if body.server_assignor is not None and body.server_assignor not in ASSIGNORS:
        return CgResult(
            "UNSUPPORTED_ASSIGNOR",
            f"ServerAssignor {body.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(ASSIGNORS)}.",
        )
    return None


async def _owned(broker: Broker, body: Any) -> set[tuple[str, int]] | None:
    if body.topic_partitions is None:
        return None
    out: set[tuple[str, int]] = set()
    for tp in body.topic_partitions:
        info = await broker.store.topic_by_id(tp.topic_id)
        if info is not None:  # a deleted topic's partitions are owned by nobody
            out.update((info.name, int(p)) for p in tp.partitions)
    return out


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    topics = body.subscribed_topic_names
    # Kafka authorizes first (KafkaApis), then the coordinator checks the request.
    result: CgResult | None = None
    if not checks.group_allowed(broker, request, Operation.READ, body.group_id):
        result = CgResult("GROUP_AUTHORIZATION_FAILED")
    elif topics:
        hidden = set(topics) - checks.allowed_topics(broker, request, Operation.DESCRIBE, topics)
        if hidden:
            result = CgResult(
                "TOPIC_AUTHORIZATION_FAILED", f"Unauthorized topics: {', '.join(sorted(hidden))}"
            )
    if result is None:
        result = _invalid(body, version)
    if result is None and await queue_store(broker).exists(body.group_id):
        # A queue (share) group of that id: not a consumer group, as Kafka answers.
        result = CgResult("GROUP_ID_NOT_FOUND", f"Group {body.group_id} is not a consumer group.")
    if result is None:
        counts = partition_counter(broker)

        async def resolve(pattern: str) -> list[str]:
            names = [n for n in await topic_names(broker.store) if n not in INTERNAL_TOPICS]
            matching = [n for n in names if regex_matches(pattern, n)]
            # Topics the principal may not DESCRIBE are left out, as Kafka does.
            return sorted(checks.allowed_topics(broker, request, Operation.DESCRIBE, matching))

        member_id = body.member_id
        if not member_id and body.member_epoch == 0:
            member_id = str(uuid.uuid4())  # v0: the coordinator names the member
        req = CgHeartbeat(
            member_id=member_id,
            epoch=body.member_epoch,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            rebalance_timeout_ms=ms(body.rebalance_timeout),
            topics=list(topics) if topics is not None else None,
            assignor=body.server_assignor,
            regex=getattr(body, "subscribed_topic_regex", None),
            owned=await _owned(broker, body),
            client_id=request.header.client_id or "",
            client_host=f"/{request.peer_host}",
        )
        try:
            result = await broker.groups.consumer_heartbeat(body.group_id, req, counts, resolve)
        except CoordinatorError as exc:
            result = CgResult(exc.code)
    data: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": errors.code(result.error),
        "error_message": result.message,
        "member_id": result.member_id,
        "member_epoch": result.epoch,
        "heartbeat_interval": 0,
        "assignment": None,
    }
    if result.error == "NONE":
        if result.epoch not in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            data["heartbeat_interval"] = broker.groups.configs.get(body.group_id, HEARTBEAT)
        if result.assignment is not None:
            parts = []
            for name, partitions in sorted(result.assignment.items()):
                info = await broker.store.get_topic(name)
                if info is not None:
                    parts.append({"topic_id": info.topic_id, "partitions": partitions})
            data["assignment"] = {"topic_partitions": parts}
    return encode_response(API_KEY, version, data)
