"""What one client connection is, security-wise: the listener it came in on, its
security protocol, and the principal it authenticated as. server.KafkaConnection holds
one ConnectionSecurity and every Request carries it (request.security)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sidecar.security.principal import ANONYMOUS, KafkaPrincipal

SASL_HANDSHAKE_KEY = 17
API_VERSIONS_KEY = 18
SASL_AUTHENTICATE_KEY = 36
# What a SASL listener serves before the client has authenticated (Kafka's
# SaslServerAuthenticator): anything else closes the connection.
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(slots=True)
class ConnectionSecurity:
    listener: str = "PLAINTEXT"  # the listener's name (listeners=NAME://host:port)
    protocol: str = "PLAINTEXT"  # one of SECURITY_PROTOCOLS
    peer_host: str = ""  # the client's address, for ACL host matching and JoinGroup
    # PLAINTEXT: ANONYMOUS; SSL: from the client certificate (ANONYMOUS without one);
    # SASL: ANONYMOUS until SaslAuthenticate succeeds.
    principal: KafkaPrincipal = ANONYMOUS
    authenticated: bool = True  # False on a SASL listener until SaslAuthenticate succeeds
    # Between SaslHandshake and the end of SaslAuthenticate: the mechanism's server
    # state (sidecar/security/sasl/).
    sasl: Any = None
    # After SaslHandshake v0 until the exchange ends: the client's SASL tokens come as
    # bare size-prefixed frames, not SaslAuthenticate requests (server.dispatch).
    sasl_unframed: bool = False
    sasl_mechanism: str | None = None
    # Authenticated with a delegation token (SCRAM `tokenauth=true`): such a session may
    # not create, renew, expire or describe tokens (Kafka's allowTokenRequests).
    token_authenticated: bool = False
    # KIP-368 (connections.max.reauth.ms): monotonic time after which the session must
    # re-authenticate before any other request; None: never.
    session_expires_at: float | None = None

    @classmethod
    def for_listener(cls, listener: str, protocol: str, peer_host: str) -> ConnectionSecurity:
        sasl = protocol.startswith("SASL_")
        return cls(listener, protocol, peer_host, ANONYMOUS, authenticated=not sasl)

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def refusal(self, api_key: int) -> str | None:
        """Why a request with this API key must close the connection now, or None."""
        if api_key in BEFORE_AUTHENTICATION:
            return None
        if not self.authenticated:
            return f"API key {api_key} before SASL authentication on listener {self.listener}"
        expires = self.session_expires_at
        if expires is not None and time.monotonic() > expires:
            return (
                f"API key {api_key} after the SASL session of {self.principal} expired "
                "(connections.max.reauth.ms); the client must re-authenticate"
            )
        return None
