"""SCRAM credentials in Redis, seen by every sidecar at once (each authentication reads
them). One hash, skiff:scram, field `<mechanism>:<user>` -> JSON {salt, stored_key,
server_key, iterations} (bytes in base64). The password is never stored: only what
RFC 5802 lets a server keep, as Kafka keeps it. One key, so a request's upserts and
deletions are applied together (one MULTI) on a single Redis or a Redis Cluster."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass

from redis.asyncio import Redis

SCRAM_KEY = "skiff:scram"
# Kafka's ScramMechanism: name -> (hash, the type code AlterUserScramCredentials uses).
MECHANISMS: dict[str, tuple[str, int]] = {
    "SCRAM-SHA-256": ("sha256", 1),
    "SCRAM-SHA-512": ("sha512", 2),
}
BY_CODE = {code: name for name, (_, code) in MECHANISMS.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations for both
MAX_ITERATIONS = 16384  # Kafka's ScramControlManager.MAX_ITERATIONS


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """RFC 5802's keys from SaltedPassword = Hi(password, salt, i), which
        AlterUserScramCredentials carries (the client salts the password)."""
        digest = MECHANISMS[mechanism][0]
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        stored_key = hashlib.new(digest, client_key).digest()
        server_key = hmac.digest(salted_password, b"Server Key", digest)
        return cls(salt, stored_key, server_key, iterations)

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, salt: bytes, iterations: int
    ) -> ScramCredential:
        digest = MECHANISMS[mechanism][0]
        salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def matches_password(self, mechanism: str, password: str) -> bool:
        """Whether `password` gives this credential (a PLAIN login of a SCRAM user);
        constant-time in the comparison. Costs `iterations` rounds of PBKDF2."""
        other = ScramCredential.from_password(mechanism, password, self.salt, self.iterations)
        return hmac.compare_digest(other.stored_key, self.stored_key)

    def to_json(self) -> str:
        b64 = base64.b64encode
        return json.dumps(
            {
                "salt": b64(self.salt).decode(),
                "stored_key": b64(self.stored_key).decode(),
                "server_key": b64(self.server_key).decode(),
                "iterations": self.iterations,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> ScramCredential:
        doc = json.loads(raw)
        b64 = base64.b64decode
        return cls(
            b64(doc["salt"]), b64(doc["stored_key"]), b64(doc["server_key"]), int(doc["iterations"])
        )


def _field(mechanism: str, user: str) -> str:
    return f"{mechanism}:{user}"


class ScramStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def get(self, mechanism: str, user: str) -> ScramCredential | None:
        raw = await self.redis.hget(SCRAM_KEY, _field(mechanism, user))
        return None if raw is None else ScramCredential.from_json(raw)

    async def user(self, user: str) -> dict[str, ScramCredential]:
        """The user's credentials by mechanism."""
        names = list(MECHANISMS)
        raws = await self.redis.hmget(SCRAM_KEY, [_field(m, user) for m in names])
        return {
            m: ScramCredential.from_json(r)
            for m, r in zip(names, raws, strict=True)
            if r is not None
        }

    async def all(self) -> dict[str, dict[str, ScramCredential]]:
        """user -> mechanism -> credential, for every user with one."""
        out: dict[str, dict[str, ScramCredential]] = {}
        for raw_field, raw in (await self.redis.hgetall(SCRAM_KEY)).items():
            mechanism, _, user = raw_field.decode().partition(":")
            if mechanism in MECHANISMS:
                out.setdefault(user, {})[mechanism] = ScramCredential.from_json(raw)
        return out

    async def alter(
        self,
        upserts: list[tuple[str, str, ScramCredential]],
        deletes: list[tuple[str, str]],
    ) -> None:
        """(mechanism, user, credential) to set and (mechanism, user) to remove, at once."""
        async with self.redis.pipeline(transaction=True) as pipe:
            if deletes:
                pipe.hdel(SCRAM_KEY, *(_field(m, u) for m, u in deletes))
            if upserts:
                pipe.hset(SCRAM_KEY, mapping={_field(m, u): c.to_json() for m, u, c in upserts})
            await pipe.execute()

    async def add_if_absent(self, mechanism: str, user: str, credential: ScramCredential) -> bool:
        """Set a credential only where the user has none for the mechanism (bootstrap)."""
        return bool(
            await self.redis.hsetnx(SCRAM_KEY, _field(mechanism, user), credential.to_json())
        )
