"""What CreateAcls, DescribeAcls and DeleteAcls share (Kafka's AclApis): the request
itself is authorized on the CLUSTER (ALTER to change, DESCRIBE to list) before anything
else, and without an ACL authorizer the answer is SECURITY_DISABLED. A code of 0
(UNKNOWN) in a resource type, pattern type, operation or permission fails Kafka's
request parsing, which closes the connection."""

from __future__ import annotations

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.framing import CloseConnection
from sidecar.security.acls.authorizer import StandardAuthorizer
from sidecar.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from sidecar.security.session import ConnectionSecurity

SECURITY_DISABLED = errors.code("SECURITY_DISABLED")
CLUSTER_AUTHORIZATION_FAILED = errors.code("CLUSTER_AUTHORIZATION_FAILED")
NO_AUTHORIZER = "No Authorizer is configured."
NOT_AUTHORIZED = "Cluster authorization failed."


def admin(
    broker: Broker, security: ConnectionSecurity, operation: Operation
) -> tuple[StandardAuthorizer | None, int, str | None]:
    """(the authorizer, NONE, None) when the request may proceed, else (None, error code,
    message)."""
    authorizer = broker.authorizer
    if not isinstance(authorizer, StandardAuthorizer):
        return None, SECURITY_DISABLED, NO_AUTHORIZER
    if not authorizer.authorize(security, operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return None, CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED
    return authorizer, errors.NONE, None


def refuse_unknown(api: str, *codes: int) -> None:
    """Kafka's request validation: UNKNOWN (0) in any of the codes closes the connection."""
    if 0 in codes:
        raise CloseConnection(f"{api} request with UNKNOWN (0) in a type, operation or permission")
