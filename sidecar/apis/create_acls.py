"""CreateAcls (key 30), v1-v3 (Kafka 4.x's range): store ACL bindings in Redis for every
sidecar (sidecar/security/acls/). Authorized by ALTER on the CLUSTER; each binding is
checked as Kafka checks it (INVALID_REQUEST with Kafka's message); creating a binding
that exists succeeds and changes nothing. More than 10,000 new bindings in one request
change nothing and get POLICY_VIOLATION, as Kafka's controller answers."""

from __future__ import annotations

from typing import Any

from sidecar.apis import acl_access
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security.acls.authorizer import TOO_LARGE, TooManyChanges
from sidecar.security.acls.model import AclBinding, InvalidAcl
from sidecar.security.authorizer import Operation

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3
POLICY_VIOLATION = errors.code("POLICY_VIOLATION")


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    creations = request.body.creations
    for c in creations:
        acl_access.refuse_unknown(
            "CreateAcls", c.resource_type, c.resource_pattern_type, c.operation, c.permission_type
        )
    authorizer, code, message = acl_access.admin(broker, request.security, Operation.ALTER)
    results: list[dict[str, Any]] = [
        {"error_code": code, "error_message": message} for _ in creations
    ]
    if authorizer is not None:
        valid: list[AclBinding] = []
        for result, c in zip(results, creations, strict=True):
            acl = AclBinding.from_codes(
                c.resource_type,
                c.resource_name,
                c.resource_pattern_type,
                c.principal,
                c.host,
                c.operation,
                c.permission_type,
            )
            try:
                acl.validate()
            except InvalidAcl as exc:
                result.update(error_code=errors.INVALID_REQUEST, error_message=str(exc))
                continue
            valid.append(acl)
        try:
            await authorizer.create(valid)
        except TooManyChanges:
            for result in results:
                result.update(error_code=POLICY_VIOLATION, error_message=TOO_LARGE)
    return encode_response(API_KEY, version, {"throttle_time": 0, "results": results})
