"""What the API handlers ask broker.authorizer, in the shapes Kafka's AuthHelper offers:
one resource, a set of topic names filtered by an operation, and the
*_authorized_operations fields. Each handler keeps its own checks (which operation on
which resource, which error code) in its module; these only save repeating the call.
Every check is one synchronous authorize() per distinct resource, answered from memory."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sidecar.protocol import errors
from sidecar.security.authorizer import CLUSTER_NAME, AllowAll, Operation, ResourceType

TOPIC_AUTHORIZATION_FAILED = errors.code("TOPIC_AUTHORIZATION_FAILED")
GROUP_AUTHORIZATION_FAILED = errors.code("GROUP_AUTHORIZATION_FAILED")
CLUSTER_AUTHORIZATION_FAILED = errors.code("CLUSTER_AUTHORIZATION_FAILED")
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = errors.code("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
# Kafka's default of *_authorized_operations: not requested (or not computed).
NOT_REQUESTED = -(2**31)

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID


def allowed(
    broker: Any, request: Any, operation: Operation, resource_type: ResourceType, name: str
) -> bool:
    return broker.authorizer.authorize(request.security, operation, resource_type, name)


def cluster_allowed(broker: Any, request: Any, operation: Operation) -> bool:
    return broker.authorizer.authorize(request.security, operation, CLUSTER, CLUSTER_NAME)


def topic_allowed(broker: Any, request: Any, operation: Operation, name: str) -> bool:
    return broker.authorizer.authorize(request.security, operation, TOPIC, name)


def group_allowed(broker: Any, request: Any, operation: Operation, group_id: str) -> bool:
    return broker.authorizer.authorize(request.security, operation, GROUP, group_id)


def allowed_topics(
    broker: Any, request: Any, operation: Operation, names: Iterable[str | None]
) -> set[str]:
    """The names (each asked once) the principal may `operation` (Kafka's
    filterByAuthorized); None names are left out."""
    authorizer = broker.authorizer
    if isinstance(authorizer, AllowAll):  # no authorizer: nothing to ask (hot paths)
        return {n for n in names if n is not None}
    security = request.security
    allowed: set[str] = set()
    asked: set[str] = set()
    for name in names:
        if name is None or name in asked:
            continue
        asked.add(name)
        if authorizer.authorize(security, operation, TOPIC, name):
            allowed.add(name)
    return allowed


def may_create_topic(broker: Any, request: Any, name: str) -> bool:
    """Auto-creation (Metadata, Produce): CREATE on the cluster or on the topic."""
    return cluster_allowed(broker, request, Operation.CREATE) or topic_allowed(
        broker, request, Operation.CREATE, name
    )


async def may_write_some_topic(broker: Any, request: Any) -> bool:
    """Kafka's authorizeByResourceType(WRITE, TOPIC) (KIP-679: enough for an idempotent
    producer): asked of the authorizer when it offers authorize_by_resource_type;
    otherwise whether the principal may WRITE some existing topic (one authorize per
    topic, once per InitProducerId). Unlike Kafka, an ACL on topics that do not exist
    yet does not count then."""
    ask = getattr(broker.authorizer, "authorize_by_resource_type", None)
    if ask is not None:
        return bool(ask(request.security, Operation.WRITE, TOPIC))
    authorize, security = broker.authorizer.authorize, request.security
    return any(
        authorize(security, Operation.WRITE, TOPIC, t.name)
        for t in await broker.store.list_topics()
    )


def authorized_operations(broker: Any, request: Any, resource_type: ResourceType, name: str) -> int:
    return broker.authorizer.authorized_operations(request.security, resource_type, name)


def cluster_authorized_operations(broker: Any, request: Any) -> int:
    """Kafka answers the cluster's operations only to a principal that may DESCRIBE it,
    0 to others."""
    if not cluster_allowed(broker, request, Operation.DESCRIBE):
        return 0
    return authorized_operations(broker, request, CLUSTER, CLUSTER_NAME)


# DescribeConfigs, AlterConfigs, IncrementalAlterConfigs: what a config resource
# (Kafka's ConfigResource.Type code) is authorized against, and the error and message
# (Kafka's) when it is not.
_CONFIG_RESOURCES = {
    2: (TOPIC, TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
    32: (GROUP, GROUP_AUTHORIZATION_FAILED, "Group authorization failed."),
}
_CLUSTER_CONFIGS = (CLUSTER, CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


def config_resource_denied(
    broker: Any, request: Any, operation: Operation, resource_type: int, name: str
) -> tuple[int, str] | None:
    """(error code, message) when the principal may not `operation` (DESCRIBE_CONFIGS or
    ALTER_CONFIGS) this config resource, else None. Broker, broker-logger and
    client-metrics resources are the cluster's."""
    kind, code, message = _CONFIG_RESOURCES.get(resource_type, _CLUSTER_CONFIGS)
    resource = CLUSTER_NAME if kind == CLUSTER else name
    if broker.authorizer.authorize(request.security, operation, kind, resource):
        return None
    return code, message
