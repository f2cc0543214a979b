"""SASL mechanisms, server side. SaslHandshake picks a mechanism by name from
MECHANISMS (those enabled on the listener); SaslAuthenticate feeds it the client's
bytes until it is complete. Each mechanism lives in its own module and registers
itself here."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from sidecar.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from sidecar.broker import Broker
    from sidecar.security.session import ConnectionSecurity


class SaslAuthenticationFailed(Exception):
    """The client's credentials were refused: SaslAuthenticate answers
    SASL_AUTHENTICATION_FAILED (58) with this message, which must name no secret."""


class SaslServer(Protocol):
    """One authentication exchange of one connection."""

    mechanism: str

    async def evaluate(self, response: bytes) -> bytes:
        """Take the client's next message, return the server's (b"" when none).
        Raises SaslAuthenticationFailed (or ValueError for malformed input)."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def principal(self) -> KafkaPrincipal | None:
        """Set once complete."""
        ...

    @property
    def lifetime_ms(self) -> int | None:
        """How long the credential stays valid from now (OAUTHBEARER: the token's
        expiry), or None; KIP-368's session lifetime is the smaller of this and
        connections.max.reauth.ms."""
        ...


# mechanism name -> factory(broker, the connection) of a fresh SaslServer
SaslServerFactory = Callable[["Broker", "ConnectionSecurity"], SaslServer]
MECHANISMS: dict[str, SaslServerFactory] = {}


def register(name: str, factory: SaslServerFactory) -> None:
    MECHANISMS[name] = factory
