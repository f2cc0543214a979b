"""DeleteAcls (key 31), v1-v3 (Kafka 4.x's range): remove the ACL bindings each filter
matches (sidecar/security/acls/) and list them per filter. Authorized by ALTER on the
CLUSTER; a filter with an unknown resource or pattern type, operation or permission
gets INVALID_REQUEST (Kafka's validateFilter). Filters matching more than 10,000
bindings together remove nothing and get POLICY_VIOLATION (Kafka's controller bound)."""

from __future__ import annotations

from typing import Any

from sidecar.apis import acl_access
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security.acls.authorizer import TOO_LARGE, TooManyChanges
from sidecar.security.acls.model import AclFilter
from sidecar.security.authorizer import Operation

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3
POLICY_VIOLATION = errors.code("POLICY_VIOLATION")


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    raw = request.body.filters
    for f in raw:
        acl_access.refuse_unknown(
            "DeleteAcls",
            f.resource_type_filter,
            f.pattern_type_filter,
            f.operation,
            f.permission_type,
        )
    authorizer, code, message = acl_access.admin(broker, request.security, Operation.ALTER)
    results: list[dict[str, Any]] = [
        {"error_code": code, "error_message": message, "matching_acls": []} for _ in raw
    ]
    if authorizer is not None:
        filters = [
            AclFilter.from_codes(
                f.resource_type_filter,
                f.resource_name_filter,
                f.pattern_type_filter,
                f.principal_filter,
                f.host_filter,
                f.operation,
                f.permission_type,
            )
            for f in raw
        ]
        valid = [(i, f) for i, f in enumerate(filters) if f.unknown() is None]
        for i, f in enumerate(filters):
            reason = f.unknown()
            if reason is not None:
                results[i].update(error_code=errors.INVALID_REQUEST, error_message=reason)
        try:
            deleted = await authorizer.delete([f for _, f in valid])
        except TooManyChanges:
            for i, _ in valid:
                results[i].update(error_code=POLICY_VIOLATION, error_message=TOO_LARGE)
            deleted = [[] for _ in valid]
        for (i, _), acls in zip(valid, deleted, strict=True):
            results[i]["matching_acls"] = [
                {
                    "error_code": errors.NONE,
                    "error_message": None,
                    "resource_type": int(acl.resource_type),
                    "resource_name": acl.name,
                    "pattern_type": int(acl.pattern_type),
                    "principal": acl.principal,
                    "host": acl.host,
                    "operation": int(acl.operation),
                    "permission_type": int(acl.permission),
                }
                for acl in acls
            ]
    return encode_response(API_KEY, version, {"throttle_time": 0, "filter_results": results})
