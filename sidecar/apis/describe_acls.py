"""DescribeAcls (key 29), v1-v3 (Kafka 4.x's range): the ACL bindings matching a filter,
grouped by resource pattern, from this sidecar's memory (sidecar/security/acls/).
Authorized by DESCRIBE on the CLUSTER."""

from __future__ import annotations

from typing import Any

from sidecar.apis import acl_access
from sidecar.broker import Broker
from sidecar.protocol.kio_codec import encode_response
from sidecar.security.acls.model import AclFilter
from sidecar.security.authorizer import Operation

API_KEY = 29
MIN_VERSION = 1
MAX_VERSION = 3


async def handle(broker: Broker, request: Any) -> bytes:
    body = request.body
    acl_access.refuse_unknown(
        "DescribeAcls",
        body.resource_type_filter,
        body.pattern_type_filter,
        body.operation,
        body.permission_type,
    )
    authorizer, code, message = acl_access.admin(broker, request.security, Operation.DESCRIBE)
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    if authorizer is not None:
        acl_filter = AclFilter.from_codes(
            body.resource_type_filter,
            body.resource_name_filter,
            body.pattern_type_filter,
            body.principal_filter,
            body.host_filter,
            body.operation,
            body.permission_type,
        )
        for acl in authorizer.describe(acl_filter):
            resources.setdefault((acl.resource_type, acl.name, acl.pattern_type), []).append(
                {
                    "principal": acl.principal,
                    "host": acl.host,
                    "operation": int(acl.operation),
                    "permission_type": int(acl.permission),
                }
            )
    return encode_response(
        API_KEY,
        request.header.api_version,
        {
            "throttle_time": 0,
            "error_code": code,
            "error_message": message,
            "resources": [
                {"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
                for (rt, name, pt), acls in resources.items()
            ],
        },
    )
