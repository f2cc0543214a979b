"""SaslAuthenticate (key 36), v0-v2: one step of the SASL exchange SaslHandshake v1 chose
(after SaslHandshake v0 the steps come as bare tokens instead: handle_unframed).
As Kafka's SaslServerAuthenticator: refused credentials get SASL_AUTHENTICATION_FAILED
with a message naming no secret and the connection is closed; SaslAuthenticate before
a handshake is ILLEGAL_SASL_STATE (closed too on a SASL listener). On success the
connection's principal is set and, with connections.max.reauth.ms > 0 or a credential
that expires, the session lifetime (KIP-368: the smaller of the two) is answered (v1+)
and enforced (sidecar/security/session.py); connections.max.reauth.ms is the
mechanism's, the listener's or the broker-wide value (sasl_config.reauth_ms). A
re-authentication must keep the principal."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.framing import CloseConnection
from sidecar.protocol.kio_codec import encode_response
from sidecar.protocol.primitives import pack_i32
from sidecar.security import sasl_config
from sidecar.security.sasl import SaslAuthenticationFailed

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2

log = logging.getLogger(__name__)

SASL_AUTHENTICATION_FAILED = errors.code("SASL_AUTHENTICATION_FAILED")
# Kafka's connection.failed.authentication.delay.ms default: a refused client's answer
# (and the close) waits this long, so a client retrying at once cannot spin the broker.
FAILED_AUTHENTICATION_DELAY_S = 0.1
ILLEGAL_SASL_STATE = errors.code("ILLEGAL_SASL_STATE")


def _response(
    version: int,
    error_code: int = errors.NONE,
    message: str | None = None,
    auth_bytes: bytes = b"",
    lifetime_ms: int = 0,
) -> bytes:
    return encode_response(
        API_KEY,
        version,
        {
            "error_code": error_code,
            "error_message": message,
            "auth_bytes": auth_bytes,
            "session_lifetime": lifetime_ms,
        },
    )


def session_lifetime_ms(reauth_ms: int, credential_ms: int | None) -> int | None:
    """KIP-368: the session ends at the credential's expiry or connections.max.reauth.ms,
    whichever comes first; None: never."""
    if credential_ms is None:
        return reauth_ms if reauth_ms > 0 else None
    if reauth_ms <= 0:
        return max(credential_ms, 0)
    return max(min(credential_ms, reauth_ms), 0)


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    security = request.security
    server = security.sasl
    if server is None:
        if not security.uses_sasl or security.authenticated:
            # Kafka's KafkaApis answer: the connection stays usable.
            return _response(
                version,
                ILLEGAL_SASL_STATE,
                "SaslAuthenticate request received after successful authentication",
            )
        raise CloseConnection(
            f"SaslAuthenticate before SaslHandshake on listener {security.listener}",
            _response(
                version,
                ILLEGAL_SASL_STATE,
                "SaslAuthenticate request received before SaslHandshake",
            ),
        )
    try:
        challenge, lifetime = await _step(broker, security, request.body.auth_bytes)
    except _Refused as exc:
        raise CloseConnection(
            exc.reason, _response(version, SASL_AUTHENTICATION_FAILED, exc.message)
        ) from None
    return _response(version, auth_bytes=challenge, lifetime_ms=lifetime or 0)


async def handle_unframed(broker: Broker, token: bytes, security: Any) -> bytes:
    """One SASL token after SaslHandshake v0: a bare size-prefixed frame, answered
    the same way (SaslServerAuthenticator without Kafka headers). A refusal closes the
    connection without an answer: v0 has no error frame."""
    try:
        challenge, lifetime = await _step(broker, security, token)
    except _Refused as exc:
        raise CloseConnection(exc.reason) from None
    if lifetime is not None:
        security.sasl_unframed = False  # the next frame is a Kafka request again
    return pack_i32(len(challenge)) + challenge


class _Refused(Exception):
    """The exchange failed: `reason` for the log, `message` for the client."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.message = message


async def _step(broker: Broker, security: Any, token: bytes) -> tuple[bytes, int | None]:
    """Feed the client's token to the exchange: (the server's answer, None) while it
    goes on; (the last answer, the session lifetime in ms, 0: none) once the
    connection is authenticated. Raises _Refused."""
    server = security.sasl
    mechanism = server.mechanism
    try:
        challenge = await server.evaluate(token)
    except (SaslAuthenticationFailed, ValueError) as exc:
        security.sasl = None
        security.sasl_unframed = False
        message = str(exc)
        if isinstance(exc, ValueError):
            message = f"Authentication failed: malformed {mechanism} message"
        await asyncio.sleep(FAILED_AUTHENTICATION_DELAY_S)
        raise _Refused(
            f"SASL {mechanism} authentication failed on listener {security.listener}: {message}",
            message,
        ) from None
    if not server.complete:
        return challenge, None
    security.sasl = None
    security.sasl_unframed = False
    principal = server.principal
    reauthentication = security.authenticated and security.sasl_mechanism is not None
    if reauthentication and principal != security.principal:
        # KIP-368: a session keeps its principal
        message = (
            f"Cannot change principals during re-authentication from {security.principal}: "
            f"{principal}"
        )
        raise _Refused(message, message)
    reauth_ms = sasl_config.reauth_ms(broker.settings, security.listener, mechanism)
    lifetime = session_lifetime_ms(reauth_ms, server.lifetime_ms)
    security.principal = principal
    security.sasl_mechanism = mechanism
    security.token_authenticated = bool(getattr(server, "token_authenticated", False))
    security.authenticated = True
    security.session_expires_at = None if lifetime is None else time.monotonic() + lifetime / 1000
    log.debug(
        "%s %s with %s on listener %s (session lifetime %s ms)",
        "re-authenticated" if reauthentication else "authenticated",
        principal,
        mechanism,
        security.listener,
        lifetime,
    )
    return challenge, lifetime or 0
