"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, with scramp.
The credential (salt, iterations, stored key, server key) is read from Redis when the
client names its user (storage/scram_store.py), so a credential altered through any
sidecar is used by the next login everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scramp import ScramException, ScramMechanism

from sidecar.security.delegation_tokens import TokenStore
from sidecar.security.principal import KafkaPrincipal
from sidecar.security.sasl import SaslAuthenticationFailed, SaslServerFactory, register
from sidecar.security.sasl.scram_token import TOKEN_AUTH, TokenScram, client_first_extensions
from sidecar.storage.scram_store import MECHANISMS, ScramCredential, ScramStore

if TYPE_CHECKING:
    from sidecar.broker import Broker
    from sidecar.security.session import ConnectionSecurity


def client_first_user(message: str) -> str:
    """The user name of a client-first message (gs2-header, then n=NAME,r=NONCE...),
    with RFC 5802's =2C and =3D unescaped."""
    parts = message.split(",")
    if len(parts) < 4 or not parts[2].startswith("n="):
        raise ValueError("malformed SCRAM client-first message")
    name = parts[2][2:]
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    def __init__(self, mechanism: str, store: ScramStore, tokens: TokenStore | None) -> None:
        self.mechanism = mechanism
        self.store = store
        self.tokens = tokens  # None: delegation tokens are off (no secret key)
        self._scram = ScramMechanism(mechanism)
        self._server: Any = None  # scramp's ScramServer, once the client-first came
        self._token: TokenScram | None = None  # instead, for `tokenauth=true`
        self._user: str | None = None
        self._complete = False

    def _failed(self) -> SaslAuthenticationFailed:
        # Kafka's text; a wrong password and an unknown user look the same.
        return SaslAuthenticationFailed(
            "Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}"
        )

    async def evaluate(self, response: bytes) -> bytes:
        try:
            message = response.decode()
        except UnicodeDecodeError:
            raise ValueError(f"{self.mechanism} message is not UTF-8") from None
        if self._token is not None:
            return await self._token_step(message)
        if self._server is None:
            if client_first_extensions(message).get(TOKEN_AUTH, "").lower() == "true":
                if self.tokens is None:
                    raise self._failed()
                self._token = TokenScram(self.mechanism, MECHANISMS[self.mechanism][0])
                return (await self._token.first(message, self.tokens)).encode()
            user = client_first_user(message)
            credential = await self.store.get(self.mechanism, user)
            if credential is None:
                raise self._failed()
            self._user = user
            server = self._scram.make_server(_auth_info(credential))
            try:
                server.set_client_first(message)
            except ScramException as exc:
                raise ValueError(f"{self.mechanism} client-first: {exc}") from None
            self._server = server
            return str(server.get_server_first()).encode()
        if self._complete:
            raise ValueError(f"{self.mechanism} exchange already complete")
        server = self._server
        try:
            server.set_client_final(message)
        except ScramException:
            raise self._failed() from None
        self._complete = True
        return str(server.get_server_final()).encode()

    async def _token_step(self, message: str) -> bytes:
        assert self._token is not None
        if self._complete:
            raise ValueError(f"{self.mechanism} exchange already complete")
        answer = self._token.final(message)
        self._complete = True
        return answer.encode()

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def token_authenticated(self) -> bool:
        return self._complete and self._token is not None

    @property
    def principal(self) -> KafkaPrincipal | None:
        if not self._complete:
            return None
        if self._token is not None:
            return self._token.principal  # the token's owner
        return KafkaPrincipal("User", self._user) if self._user else None

    @property
    def lifetime_ms(self) -> int | None:
        # a SCRAM credential does not expire; a delegation token does
        return self._token.lifetime_ms if self.token_authenticated and self._token else None


AuthInfo = tuple[bytes, bytes, bytes, int]


def _auth_info(credential: ScramCredential) -> Callable[[str], AuthInfo]:
    def auth_fn(_user: str) -> AuthInfo:
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    return auth_fn


def _factory(mechanism: str) -> SaslServerFactory:
    def make(broker: Broker, _security: ConnectionSecurity) -> ScramServer:
        tokens = None
        if broker.settings.delegation_token_secret_key:
            tokens = TokenStore(broker.store.redis)
        return ScramServer(mechanism, ScramStore(broker.store.redis), tokens)

    return make


for _name in MECHANISMS:
    register(_name, _factory(_name))
