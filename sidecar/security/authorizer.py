"""The authorizer every API handler asks (broker.authorizer): Kafka's operation and
resource type codes, and the interface. Without `authorizer.class.name` every request
is allowed (AllowAll), as on a Kafka broker without an authorizer."""

from __future__ import annotations

from enum import IntEnum
from typing import Protocol

from sidecar.security.session import ConnectionSecurity


class Operation(IntEnum):
    """Kafka's AclOperation codes (also the bit positions of *_authorized_operations)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(IntEnum):
    """Kafka's ResourceType codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's PatternType codes."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name, as in Kafka

# The operations each resource type supports (Kafka's AclEntry.supportedOperations):
# what *_authorized_operations reports for an allowed principal.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset(
        {
            Operation.READ,
            Operation.WRITE,
            Operation.CREATE,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {
            Operation.READ,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.CLUSTER: frozenset(
        {
            Operation.CREATE,
            Operation.CLUSTER_ACTION,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
            Operation.IDEMPOTENT_WRITE,
            Operation.ALTER,
            Operation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset(
        {Operation.DESCRIBE, Operation.WRITE, Operation.TWO_PHASE_COMMIT}
    ),
    ResourceType.DELEGATION_TOKEN: frozenset({Operation.DESCRIBE}),
    ResourceType.USER: frozenset({Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS}),
}


def operations_bitfield(operations: frozenset[Operation] | set[Operation]) -> int:
    """Kafka's 32-bit field of operations (bit n set: operation code n)."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


class Authorizer(Protocol):
    """Answers from memory (no Redis round trip per request): the ACLs are cached and
    kept current by the implementation."""

    def authorize(
        self,
        security: ConnectionSecurity,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool: ...

    def authorized_operations(
        self, security: ConnectionSecurity, resource_type: ResourceType, name: str
    ) -> int:
        """The *_authorized_operations bitfield of a Metadata/DescribeCluster/
        DescribeGroups response for this resource."""
        ...


class AllowAll:
    """No authorizer configured: everything is allowed, and the authorized operations
    of a resource are all those its type supports (as Kafka reports them then)."""

    def authorize(
        self,
        security: ConnectionSecurity,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        return True

    def authorized_operations(
        self, security: ConnectionSecurity, resource_type: ResourceType, name: str
    ) -> int:
        return operations_bitfield(SUPPORTED_OPERATIONS.get(resource_type, frozenset()))
