"""ExpireDelegationToken (key 40), v1-v2: a negative period removes the token at once
(and answers that period as the expiry, as Kafka does); otherwise its expiry moves to now
plus the period, never past its maximum. The checks are renew's
(renew_delegation_token.checked_token)."""

from __future__ import annotations

from typing import Any

from sidecar.apis.renew_delegation_token import checked_token
from sidecar.broker import Broker
from sidecar.protocol.kio_codec import encode_response, ms
from sidecar.security.delegation_tokens import TokenStore, now_ms

API_KEY = 40
MIN_VERSION = 1
MAX_VERSION = 2


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    error, token = await checked_token(broker, request)
    expiry = -1
    if token is not None:
        store = TokenStore(broker.store.redis)
        period = ms(request.body.expiry_time_period)
        if period < 0:
            expiry = period
            await store.remove(token)
        else:
            expiry = min(token.max_ms, now_ms() + period)
            await store.set_expiry(token, expiry)
    return encode_response(
        API_KEY, version, {"error_code": error, "expiry_timestamp": expiry, "throttle_time": 0}
    )
