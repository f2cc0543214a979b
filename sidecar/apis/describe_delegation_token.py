"""DescribeDelegationToken (key 41), v1-v3: the live tokens of the owners asked for (null:
every owner; an empty list: none), each only if the requester owns, requested or may
renew it, has DESCRIBE on the DELEGATION_TOKEN resource of its id, or DESCRIBE_TOKENS on
the USER resource of its owner (Kafka's DelegationTokenManager.filterToken). An owner
"matches" a token it owns, requested or may renew. The HMAC is in the answer, as Kafka
sends it."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response
from sidecar.security.authorizer import Operation, ResourceType
from sidecar.security.delegation_tokens import TokenInfo, TokenStore, requests_allowed
from sidecar.security.principal import KafkaPrincipal

API_KEY = 41
MIN_VERSION = 1
MAX_VERSION = 3


def _described(token: TokenInfo) -> dict[str, Any]:
    return {
        "principal_type": token.owner.type,
        "principal_name": token.owner.name,
        "token_requester_principal_type": token.requester.type,
        "token_requester_principal_name": token.requester.name,
        "issue_timestamp": token.issue_ms,
        "expiry_timestamp": token.expiry_ms,
        "max_timestamp": token.max_ms,
        "token_id": token.token_id,
        "hmac": token.hmac,
        "renewers": [{"principal_type": r.type, "principal_name": r.name} for r in token.renewers],
    }


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    security = request.security
    out: dict[str, Any] = {"error_code": errors.NONE, "tokens": [], "throttle_time": 0}
    if not requests_allowed(security):
        out["error_code"] = errors.code("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")
        return encode_response(API_KEY, version, out)
    if not broker.settings.delegation_token_secret_key:
        out["error_code"] = errors.code("DELEGATION_TOKEN_AUTH_DISABLED")
        return encode_response(API_KEY, version, out)
    owners = request.body.owners
    if owners is not None and not owners:
        return encode_response(API_KEY, version, out)
    wanted = None
    if owners is not None:
        wanted = [KafkaPrincipal(o.principal_type, o.principal_name) for o in owners]
    requester = security.principal
    authorizer = broker.authorizer

    def eligible(token: TokenInfo) -> bool:
        if wanted is not None and not any(token.owner_or_renewer(o) for o in wanted):
            return False
        if token.owner_or_renewer(requester):
            return True
        return authorizer.authorize(
            security, Operation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id
        ) or authorizer.authorize(
            security, Operation.DESCRIBE_TOKENS, ResourceType.USER, str(token.owner)
        )

    tokens = await TokenStore(broker.store.redis).all()
    out["tokens"] = [_described(t) for t in sorted(tokens, key=lambda t: t.issue_ms) if eligible(t)]
    return encode_response(API_KEY, version, out)
