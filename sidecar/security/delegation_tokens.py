"""Delegation tokens (KIP-48, KIP-373), stored in Redis so every sidecar sees them.

A token is an id (a random UUID) and an HMAC-SHA512 of it under
delegation.token.secret.key; a client authenticates with SCRAM, the token id as user
name, the HMAC (base64) as password and the SCRAM extension `tokenauth=true`
(sidecar/security/sasl/scram_token.py), and acts as the token's owner. Kafka's
arithmetic (DelegationTokenControlManager): a token lives at most
delegation.token.max.lifetime.ms (or less, if the creator asks) and expires
delegation.token.expiry.time.ms after its creation or last renewal, never after its
maximum.

Redis: hash skiff:tokens, field token id -> JSON (owner, requester, renewers, issue,
expiry, max, hmac in base64); hash skiff:token-hmacs, base64 HMAC -> token id, as Kafka's
token cache looks tokens up by HMAC for renew and expire. Both change in one MULTI.
Kafka removes expired tokens every delegation.token.expiry.check.interval.ms; Skiff
removes one whenever it is read after its expiry, and refuses it at once."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from sidecar.security.principal import ANONYMOUS, KafkaPrincipal

TOKENS_KEY = "skiff:tokens"
HMACS_KEY = "skiff:token-hmacs"
# Kafka's defaults: delegation.token.max.lifetime.ms (7 days) and
# delegation.token.expiry.time.ms (1 day).
DEFAULT_MAX_LIFETIME_MS = 7 * 24 * 3600 * 1000
DEFAULT_EXPIRY_TIME_MS = 24 * 3600 * 1000


def now_ms() -> int:
    return int(time.time() * 1000)


def token_hmac(secret_key: str, token_id: str) -> bytes:
    """Kafka's DelegationTokenControlManager.createHmac: HmacSHA512 keyed with the
    secret's UTF-8 bytes, over the token id's."""
    return hmac.digest(secret_key.encode(), token_id.encode(), hashlib.sha512)


@dataclass(slots=True)
class TokenInfo:
    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_ms: int
    expiry_ms: int
    max_ms: int
    hmac: bytes

    def expired(self, at_ms: int) -> bool:
        return self.max_ms < at_ms or self.expiry_ms < at_ms

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer: who may describe it."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def may_renew(self, principal: KafkaPrincipal) -> bool:
        """Kafka's allowedToRenew (renew and expire): the owner or a renewer."""
        return principal == self.owner or principal in self.renewers

    def to_json(self) -> str:
        return json.dumps(
            {
                "owner": str(self.owner),
                "requester": str(self.requester),
                "renewers": [str(r) for r in self.renewers],
                "issue": self.issue_ms,
                "expiry": self.expiry_ms,
                "max": self.max_ms,
                "hmac": base64.b64encode(self.hmac).decode(),
            }
        )

    @classmethod
    def from_json(cls, token_id: str, raw: str | bytes) -> TokenInfo:
        doc = json.loads(raw)
        return cls(
            token_id,
            KafkaPrincipal.parse(doc["owner"]),
            KafkaPrincipal.parse(doc["requester"]),
            tuple(KafkaPrincipal.parse(r) for r in doc["renewers"]),
            int(doc["issue"]),
            int(doc["expiry"]),
            int(doc["max"]),
            base64.b64decode(doc["hmac"]),
        )


class TokenStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def create(
        self,
        secret_key: str,
        owner: KafkaPrincipal,
        requester: KafkaPrincipal,
        renewers: tuple[KafkaPrincipal, ...],
        max_lifetime_ms: int,
        expiry_time_ms: int,
    ) -> TokenInfo:
        """A new token; max_lifetime_ms is already the smaller of the server's and the
        request's (Kafka: the request's counts only when > 0)."""
        issued = now_ms()
        token_id = str(uuid.uuid4())
        max_ms = issued + max_lifetime_ms
        token = TokenInfo(
            token_id,
            owner,
            requester,
            renewers,
            issued,
            min(max_ms, issued + expiry_time_ms),
            max_ms,
            token_hmac(secret_key, token_id),
        )
        await self._put(token)
        return token

    async def _put(self, token: TokenInfo) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(TOKENS_KEY, token.token_id, token.to_json())
            pipe.hset(HMACS_KEY, base64.b64encode(token.hmac).decode(), token.token_id)
            await pipe.execute()

    async def set_expiry(self, token: TokenInfo, expiry_ms: int) -> None:
        token.expiry_ms = expiry_ms
        await self._put(token)

    async def remove(self, token: TokenInfo) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hdel(TOKENS_KEY, token.token_id)
            pipe.hdel(HMACS_KEY, base64.b64encode(token.hmac).decode())
            await pipe.execute()

    async def by_id(self, token_id: str) -> TokenInfo | None:
        """The token, or None (unknown, or expired: then removed)."""
        raw = await self.redis.hget(TOKENS_KEY, token_id)
        return await self._live(token_id, raw)

    async def by_hmac(self, token_hmac_bytes: bytes) -> TokenInfo | None:
        """The token whose HMAC this is, expired or not (renew and expire say
        DELEGATION_TOKEN_EXPIRED for one that is)."""
        token_id = await self.redis.hget(HMACS_KEY, base64.b64encode(token_hmac_bytes).decode())
        if token_id is None:
            return None
        raw = await self.redis.hget(TOKENS_KEY, token_id)
        if raw is None:
            return None
        return TokenInfo.from_json(token_id.decode(), raw)

    async def all(self) -> list[TokenInfo]:
        """Every live token (expired ones are removed on the way)."""
        out = []
        for token_id, raw in (await self.redis.hgetall(TOKENS_KEY)).items():
            token = await self._live(token_id.decode(), raw)
            if token is not None:
                out.append(token)
        return out

    async def _live(self, token_id: str, raw: bytes | None) -> TokenInfo | None:
        if raw is None:
            return None
        token = TokenInfo.from_json(token_id, raw)
        if token.expired(now_ms()):
            await self.remove(token)
            return None
        return token


def requests_allowed(security: Any) -> bool:
    """Kafka's KafkaApis.allowTokenRequests: not over PLAINTEXT, not over SSL without a
    client certificate, not from a session that authenticated with a token."""
    if security.token_authenticated or security.protocol == "PLAINTEXT":
        return False
    return not (security.protocol == "SSL" and security.principal == ANONYMOUS)
