"""SaslHandshake (key 17), v0-v1: the client names its SASL mechanism. After v1
SaslAuthenticate requests carry the exchange (sidecar/apis/sasl_authenticate.py); after
v0 the client's tokens come as bare frames (a 4-byte size and the token, no request
header), each answered the same way, until the exchange ends; then Kafka requests
follow (server.dispatch, sasl_authenticate.handle_unframed). As Kafka's
SaslServerAuthenticator: a mechanism not enabled on the listener gets
UNSUPPORTED_SASL_MECHANISM with the enabled list and the connection is closed; on an
authenticated connection a handshake starts a KIP-368 re-authentication, which must
use the same mechanism; on a listener without SASL it is ILLEGAL_SASL_STATE."""

from __future__ import annotations

from typing import Any

import sidecar.security.sasl.oauthbearer  # noqa: F401  (registers OAUTHBEARER)
import sidecar.security.sasl.plain  # noqa: F401  (registers PLAIN)
import sidecar.security.sasl.scram  # noqa: F401  (registers SCRAM-SHA-256/512)
from sidecar.broker import Broker
from sidecar.protocol import errors
from sidecar.protocol.framing import CloseConnection
from sidecar.protocol.kio_codec import encode_response
from sidecar.security import sasl_config
from sidecar.security.sasl import MECHANISMS

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1

UNSUPPORTED_SASL_MECHANISM = errors.code("UNSUPPORTED_SASL_MECHANISM")
ILLEGAL_SASL_STATE = errors.code("ILLEGAL_SASL_STATE")


def enabled_mechanisms(broker: Broker, listener: str) -> list[str]:
    """The listener's sasl.enabled.mechanisms this build serves, in configured order."""
    return [m for m in sasl_config.enabled_mechanisms(broker.settings, listener) if m in MECHANISMS]


def _response(version: int, error_code: int, mechanisms: list[str]) -> bytes:
    return encode_response(API_KEY, version, {"error_code": error_code, "mechanisms": mechanisms})


async def handle(broker: Broker, request: Any) -> bytes:
    version = request.header.api_version
    security = request.security
    if not security.uses_sasl:
        return _response(version, ILLEGAL_SASL_STATE, [])
    if security.sasl is not None:
        raise CloseConnection(
            f"SaslHandshake during a SASL exchange ({security.sasl.mechanism}) on listener "
            f"{security.listener}"
        )
    mechanism = request.body.mechanism
    enabled = enabled_mechanisms(broker, security.listener)
    if security.authenticated and mechanism != security.sasl_mechanism:
        # KIP-368: re-authentication keeps the mechanism of the session.
        raise CloseConnection(
            f"re-authentication of {security.principal} with SASL mechanism {mechanism!r} "
            f"instead of {security.sasl_mechanism}",
            _response(version, UNSUPPORTED_SASL_MECHANISM, [str(security.sasl_mechanism)]),
        )
    if mechanism not in enabled:
        raise CloseConnection(
            f"unsupported SASL mechanism {mechanism[:64]!r} on listener {security.listener} "
            f"(enabled: {', '.join(enabled) or 'none'})",
            _response(version, UNSUPPORTED_SASL_MECHANISM, enabled),
        )
    security.sasl = MECHANISMS[mechanism](broker, security)
    security.sasl_unframed = version == 0
    return _response(version, errors.NONE, enabled)
