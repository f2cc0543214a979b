"""CreateDelegationToken (key 38), v1-v3: a token for the requester or, with CREATE_TOKENS
on the owner (v3), for another user (sidecar/security/delegation_tokens.py). Kafka's
checks in its order: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (PLAINTEXT, SSL without a
client certificate, a token-authenticated session), DELEGATION_TOKEN_AUTHORIZATION_FAILED,
INVALID_PRINCIPAL_TYPE for a renewer that is not a User, DELEGATION_TOKEN_AUTH_DISABLED
without delegation.token.secret.key."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response, ms
from sidecar.security.authorizer import Operation, ResourceType
from sidecar.security.delegation_tokens import TokenStore, requests_allowed
from sidecar.security.principal import KafkaPrincipal

API_KEY = 38
MIN_VERSION = 1
MAX_VERSION = 3


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    body = request.body
    security = request.security
    requester = security.principal
    owner_name = getattr(body, "owner_principal_name", None)
    owner = (
        KafkaPrincipal(body.owner_principal_type or "User", owner_name) if owner_name else requester
    )
    out: dict[str, Any] = {
        "principal_type": owner.type,
        "principal_name": owner.name,
        "token_requester_principal_type": requester.type,
        "token_requester_principal_name": requester.name,
        "issue_timestamp": -1,
        "expiry_timestamp": -1,
        "max_timestamp": -1,
        "token_id": "",
        "hmac": b"",
        "throttle_time": 0,
    }
    error = errors.NONE
    settings = broker.settings
    if not requests_allowed(security):
        error = errors.code("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")
    elif owner != requester and not broker.authorizer.authorize(
        security, Operation.CREATE_TOKENS, ResourceType.USER, str(owner)
    ):
        error = errors.code("DELEGATION_TOKEN_AUTHORIZATION_FAILED")
    elif any(r.principal_type != "User" for r in body.renewers):
        error = errors.code("INVALID_PRINCIPAL_TYPE")
    elif not settings.delegation_token_secret_key:
        error = errors.code("DELEGATION_TOKEN_AUTH_DISABLED")
    else:
        max_lifetime = settings.delegation_token_max_lifetime_ms
        asked = ms(body.max_lifetime)
        if asked > 0:
            max_lifetime = min(max_lifetime, asked)
        token = await TokenStore(broker.store.redis).create(
            settings.delegation_token_secret_key,
            owner,
            requester,
            tuple(KafkaPrincipal(r.principal_type, r.principal_name) for r in body.renewers),
            max_lifetime,
            settings.delegation_token_expiry_time_ms,
        )
        out.update(
            issue_timestamp=token.issue_ms,
            expiry_timestamp=token.expiry_ms,
            max_timestamp=token.max_ms,
            token_id=token.token_id,
            hmac=token.hmac,
        )
    out["error_code"] = error
    return encode_response(API_KEY, version, out)
