"""RenewDelegationToken (key 39), v1-v2: the token's expiry moves to now plus the
renew period (at most delegation.token.expiry.time.ms; the server's value when the
period is not positive), never past the token's maximum. As Kafka:
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, then DELEGATION_TOKEN_AUTH_DISABLED,
DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED, DELEGATION_TOKEN_OWNER_MISMATCH
(only the owner and the renewers renew); expiry -1 with an error."""

from __future__ import annotations

from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.kio_codec import encode_response, ms
from sidecar.security.delegation_tokens import TokenInfo, TokenStore, now_ms, requests_allowed

API_KEY = 39
MIN_VERSION = 1
MAX_VERSION = 2


async def checked_token(broker: Broker, request: Any) -> tuple[int, TokenInfo | None]:
    """(error, the token the request's HMAC names): Kafka's checks shared by renew and
    expire, in its order."""
    if not requests_allowed(request.security):
        return errors.code("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"), None
    if not broker.settings.delegation_token_secret_key:
        return errors.code("DELEGATION_TOKEN_AUTH_DISABLED"), None
    token = await TokenStore(broker.store.redis).by_hmac(request.body.hmac)
    if token is None:
        return errors.code("DELEGATION_TOKEN_NOT_FOUND"), None
    if token.expired(now_ms()):
        return errors.code("DELEGATION_TOKEN_EXPIRED"), None
    if not token.may_renew(request.security.principal):
        return errors.code("DELEGATION_TOKEN_OWNER_MISMATCH"), None
    return errors.NONE, token


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    error, token = await checked_token(broker, request)
    expiry = -1
    if token is not None:
        renew = broker.settings.delegation_token_expiry_time_ms
        asked = ms(request.body.renew_period)
        if asked > 0:
            renew = min(renew, asked)
        expiry = min(token.max_ms, now_ms() + renew)
        await TokenStore(broker.store.redis).set_expiry(token, expiry)
    return encode_response(
        API_KEY, version, {"error_code": error, "expiry_timestamp": expiry, "throttle_time": 0}
    )
