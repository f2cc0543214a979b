"""PLAIN (RFC 4616), server side. A login is checked against, in order: the listener's
JAAS users (--config's `listener.name.<l>.plain.sasl.jaas.config`, Kafka's
PlainLoginModule `user_NAME="password"` list) and the --sasl-plain-users-file
(`user:password` lines, re-read when it changes), then the user's SCRAM credential in
Redis (the password salted with the stored salt and iterations must give the stored
key), so one set of SCRAM users also serves PLAIN clients. Comparisons are
constant-time."""

from __future__ import annotations

import asyncio
import hmac
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from sidecar.security.principal import KafkaPrincipal
from sidecar.security.sasl import SaslAuthenticationFailed, register
from sidecar.security.sasl_config import plain_jaas
from sidecar.storage.scram_store import ScramStore

if TYPE_CHECKING:
    from sidecar.broker import Broker
    from sidecar.config.settings import Settings
    from sidecar.security.session import ConnectionSecurity

MECHANISM = "PLAIN"
INVALID = "Authentication failed: Invalid username or password"  # Kafka's PlainSaslServer

# user_NAME="password" (the value may escape '"' and '\' with a backslash)
_JAAS_USER = re.compile(r'\buser_([^\s=]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@lru_cache(maxsize=64)
def jaas_users(jaas: str) -> dict[str, str]:
    """The user_NAME="password" options of a PlainLoginModule JAAS config."""
    return {name: re.sub(r"\\(.)", r"\1", password) for name, password in _JAAS_USER.findall(jaas)}


def parse_users_file(text: str, source: str) -> dict[str, str]:
    """`user:password` per line; blank lines and `#` comments skipped."""
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user:
            raise ValueError(f"{source}:{number}: expected user:password")
        users[user] = password
    return users


class UsersFile:
    """The --sasl-plain-users-file, re-read when its modification time or size changes
    (a Kubernetes Secret mounted as a file is replaced on rotation)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._users: dict[str, str] = {}

    def users(self) -> dict[str, str]:
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp != self._stamp:
                self._users = parse_users_file(self.path.read_text(), str(self.path))
                self._stamp = stamp
        except (OSError, ValueError):
            pass  # keep the last good users; the start-up check reported the file
        return self._users


_FILES: dict[Path, UsersFile] = {}


def configured_users(settings: Settings, listener: str) -> dict[str, str] | None:
    """The users the listener's configuration names (JAAS, then the file), or None
    when none is configured."""
    found: dict[str, str] | None = None
    if settings.sasl_plain_users_file is not None:
        path = settings.sasl_plain_users_file
        users_file = _FILES.setdefault(path, UsersFile(path))
        found = dict(users_file.users())
    jaas = plain_jaas(settings, listener)
    if jaas is not None:
        found = {**(found or {}), **jaas_users(jaas)}
    return found


def split_message(message: bytes) -> tuple[str, str, str]:
    """authzid NUL authcid NUL password, as Kafka's PlainSaslServer reads it."""
    parts = message.split(b"\x00")
    if len(parts) != 3:
        raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, user, password = (p.decode() for p in parts)
    except UnicodeDecodeError:
        raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
    if not user:
        raise SaslAuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationFailed("Authentication failed: password not specified")
    if authzid and authzid != user:
        raise SaslAuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different "
            "from username"
        )
    return authzid, user, password


class PlainServer:
    mechanism = MECHANISM

    def __init__(self, broker: Broker, security: ConnectionSecurity) -> None:
        self.broker = broker
        self.listener = security.listener
        self._user: str | None = None

    async def evaluate(self, response: bytes) -> bytes:
        if self._user is not None:
            raise ValueError("PLAIN exchange already complete")
        _, user, password = split_message(response)
        if not await self._valid(user, password):
            raise SaslAuthenticationFailed(INVALID)
        self._user = user
        return b""

    async def _valid(self, user: str, password: str) -> bool:
        users = configured_users(self.broker.settings, self.listener)
        if users is not None and user in users:
            return hmac.compare_digest(users[user].encode(), password.encode())
        credentials = await ScramStore(self.broker.store.redis).user(user)
        for mechanism, credential in sorted(credentials.items(), reverse=True):
            # PBKDF2 with thousands of rounds: off the event loop.
            if await asyncio.to_thread(credential.matches_password, mechanism, password):
                return True
        return False

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def principal(self) -> KafkaPrincipal | None:
        return KafkaPrincipal("User", self._user) if self._user is not None else None

    @property
    def lifetime_ms(self) -> int | None:
        return None


register(MECHANISM, PlainServer)
