"""CreatePartitions (key 37), v0-v3: grow a topic (never shrink), with validate_only
and manual assignments (single-replica ones naming a live sidecar, since Redis keeps
the one copy). New partitions start empty at offset 0; existing ones are untouched.
Answers follow Kafka 3.9's codes and messages.
Needs ALTER on each topic (else TOPIC_AUTHORIZATION_FAILED), as in Kafka."""

from __future__ import annotations

from typing import Any

from sidecar.apis import controller_mutation
from sidecar.apis.replica_assignment import INVALID_REPLICA_ASSIGNMENT, check_replicas
from sidecar.broker import Broker
from sidecar.config.admin import AdminError
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.quotas import MutationQuota
from sidecar.security import checks
from sidecar.security.authorizer import Operation
from sidecar.storage import topic_admin
from sidecar.validation.topic_names import invalid_name_reason

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3

# Kafka's controller refuses requests that create more partitions than this at once
# (MAX_PARTITIONS_PER_BATCH, for CreateTopics; 3.9's CreatePartitions fails with an
# unknown server error instead). Skiff applies it to both.
MAX_NEW_PARTITIONS = 10_000
POLICY_VIOLATION = errors.code("POLICY_VIOLATION")


def _check_assignments(broker: Broker, assignments: Any, added: int) -> None:
    if len(assignments) != added:
        raise AdminError(
            INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {added} additional partition(s), but only "
            f"{len(assignments)} assignment(s) were specified.",
        )
    live = {b.node_id for b in broker.cluster.brokers()}
    for assignment in assignments:
        ids = list(assignment.broker_ids)
        check_replicas(ids, live)
        if len(ids) != 1:
            raise AdminError(
                INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes a partition with {len(ids)} "
                "replica(s), but this is not consistent with previous partitions, which have "
                "1 replica(s).",
            )


async def _grow(
    broker: Broker, topic: Any, validate_only: bool, quota: MutationQuota | None
) -> dict[str, Any]:
    name, count = topic.name, topic.count
    counted = False  # a retried compare-and-set runs `check` again: count once

    def check(current: int) -> None:
        nonlocal counted
        if count == current:
            raise AdminError(
                errors.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
            )
        if count < current:
            raise AdminError(
                errors.INVALID_PARTITIONS,
                f"The topic {name} currently has {current} partition(s); {count} would not "
                "be an increase.",
            )
        if count - current > MAX_NEW_PARTITIONS:
            raise AdminError(
                POLICY_VIOLATION, "Excessively large number of partitions per request."
            )
        if topic.assignments is not None:
            _check_assignments(broker, topic.assignments, count - current)
        if not counted:
            controller_mutation.record(quota, count - current)
            counted = True

    try:
        if invalid_name_reason(name):
            raise topic_admin.TopicGone(name)
        await topic_admin.add_partitions(broker.store, name, check, count, validate_only)
    except topic_admin.TopicGone:
        return {
            "name": name,
            "error_code": errors.UNKNOWN_TOPIC_OR_PARTITION,
            "error_message": None,
        }
    except AdminError as exc:
        return {"name": name, "error_code": exc.code, "error_message": exc.message}
    return {"name": name, "error_code": errors.NONE, "error_message": None}


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    names = [t.name for t in body.topics]
    results: list[dict[str, Any]] = []
    seen: set[str] = set()
    quota = controller_mutation.quota_for(broker, request, API_KEY)
    for topic in body.topics:
        if topic.name in seen:
            continue
        seen.add(topic.name)
        if names.count(topic.name) > 1:
            results.append(
                {
                    "name": topic.name,
                    "error_code": errors.INVALID_REQUEST,
                    "error_message": "Duplicate topic name.",
                }
            )
        elif not checks.topic_allowed(broker, request, Operation.ALTER, topic.name):
            results.append(
                {
                    "name": topic.name,
                    "error_code": checks.TOPIC_AUTHORIZATION_FAILED,
                    "error_message": None,
                }
            )
        else:
            results.append(await _grow(broker, topic, body.validate_only, quota))
    throttle = controller_mutation.throttle_ms(quota)
    return encode_response(
        API_KEY, request.header.api_version, {"throttle_time": throttle, "results": results}
    )
