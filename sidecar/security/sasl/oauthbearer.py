"""SASL/OAUTHBEARER (RFC 7628, KIP-255/KIP-768): the client sends a JWT, validated
here the way Kafka's OAuthBearerValidatorCallbackHandler does: the signature against
a JWKS (sasl.oauthbearer.jwks.endpoint.url), exp/nbf/iat with
sasl.oauthbearer.clock.skew.seconds, the expected issuer and audience, the principal
from sasl.oauthbearer.sub.claim.name and the scopes from sasl.oauthbearer.scope.claim.name.
A JWKS fetch that fails is retried with exponential back-off
(sasl.oauthbearer.jwks.endpoint.retry.backoff.ms up to ...retry.backoff.max.ms).

A refused token gets Kafka's answer: the server challenge {"status":"invalid_token"},
then, on the client's %x01, SaslAuthenticationFailed naming the problem (never the
token)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jwt

from sidecar.security.principal import KafkaPrincipal
from sidecar.security.sasl import SaslAuthenticationFailed, register
from sidecar.security.sasl_config import enabled_mechanisms

if TYPE_CHECKING:
    from sidecar.broker import Broker
    from sidecar.config.settings import Settings
    from sidecar.security.session import ConnectionSecurity

MECHANISM = "OAUTHBEARER"
_log = logging.getLogger("skiff.sasl.oauthbearer")

# Asymmetric signatures only: "none" and HMAC (whose key would be a shared secret the
# JWKS publishes) are refused before the signature is looked at.
ALLOWED_ALGORITHMS = (
    *("RS256", "RS384", "RS512"),
    *("PS256", "PS384", "PS512"),
    *("ES256", "ES384", "ES512"),
)
# RFC 7628's client first message, as Kafka's OAuthBearerClientInitialResponse reads it.
_SASLNAME = rb"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_CLIENT_FIRST = re.compile(
    rb"n,(?:a=(?P<authzid>" + _SASLNAME + rb"))?,\x01"
    rb"(?P<pairs>(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*)\x01",
    re.DOTALL,
)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
INVALID_TOKEN = b'{"status":"invalid_token"}'
# An unknown kid triggers a JWKS refresh, but not more often than this (a client sending
# made-up kids must not turn every attempt into a request to the identity provider).
UNKNOWN_KID_REFRESH_FLOOR_S = 1.0
JWKS_MAX_BYTES = 1024 * 1024
JWKS_FETCH_TIMEOUT_S = 10.0

# Kafka's names of the settings, and the Settings fields holding them.
SETTING_NAMES = {
    "sasl.oauthbearer.jwks.endpoint.url": "jwks_endpoint_url",
    "sasl.oauthbearer.expected.issuer": "expected_issuer",
    "sasl.oauthbearer.expected.audience": "expected_audience",
    "sasl.oauthbearer.sub.claim.name": "sub_claim_name",
    "sasl.oauthbearer.clock.skew.seconds": "clock_skew_seconds",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "jwks_endpoint_refresh_ms",
    "sasl.oauthbearer.scope.claim.name": "scope_claim_name",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "jwks_endpoint_retry_backoff_ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "jwks_endpoint_retry_backoff_max_ms",
}


_MECHANISM_PREFIX = "oauthbearer."  # Kafka's per-mechanism prefix of listener settings


class OAuthBearerConfigError(ValueError):
    """A setting that cannot work; the message says which and why."""


@dataclass(frozen=True, slots=True)
class OAuthBearerSettings:
    """One listener's sasl.oauthbearer.* settings, with Kafka's defaults."""

    jwks_endpoint_url: str | None = None
    expected_issuer: str | None = None
    expected_audience: tuple[str, ...] = ()
    sub_claim_name: str = "sub"
    clock_skew_seconds: int = 30
    jwks_endpoint_refresh_ms: int = 3_600_000
    scope_claim_name: str = "scope"
    jwks_endpoint_retry_backoff_ms: int = 100
    jwks_endpoint_retry_backoff_max_ms: int = 10_000

    @classmethod
    def for_listener(cls, settings: Settings, listener: str) -> OAuthBearerSettings:
        """The broker-wide settings, overridden by server.properties'
        listener.name.<listener>.sasl.oauthbearer.* and, above those, Kafka's
        mechanism-prefixed listener.name.<listener>.oauthbearer.sasl.oauthbearer.*."""
        base = cls(
            jwks_endpoint_url=settings.sasl_oauthbearer_jwks_endpoint_url,
            expected_issuer=settings.sasl_oauthbearer_expected_issuer,
            expected_audience=settings.sasl_oauthbearer_expected_audience,
            sub_claim_name=settings.sasl_oauthbearer_sub_claim_name,
            clock_skew_seconds=settings.sasl_oauthbearer_clock_skew_seconds,
            jwks_endpoint_refresh_ms=settings.sasl_oauthbearer_jwks_endpoint_refresh_ms,
            scope_claim_name=settings.sasl_oauthbearer_scope_claim_name,
            jwks_endpoint_retry_backoff_ms=settings.sasl_oauthbearer_jwks_endpoint_retry_backoff_ms,
            jwks_endpoint_retry_backoff_max_ms=(
                settings.sasl_oauthbearer_jwks_endpoint_retry_backoff_max_ms
            ),
        )
        plain: dict[str, str] = {}
        prefixed: dict[str, str] = {}
        for name, key, value in settings.listener_overrides:
            if name != listener.upper():
                continue
            if key in SETTING_NAMES:
                plain[key] = value
            elif (
                key.startswith(_MECHANISM_PREFIX) and key[len(_MECHANISM_PREFIX) :] in SETTING_NAMES
            ):
                prefixed[key[len(_MECHANISM_PREFIX) :]] = value
        overrides = plain | prefixed
        return base.with_overrides(overrides) if overrides else base

    def with_overrides(self, values: Mapping[str, str]) -> OAuthBearerSettings:
        """These settings with Kafka-named ones (sasl.oauthbearer.*) replaced."""
        changes: dict[str, Any] = {}
        for key, text in values.items():
            field_name = SETTING_NAMES.get(key)
            if field_name is None:
                raise OAuthBearerConfigError(f"{key} is not an OAUTHBEARER setting Skiff knows")
            changes[field_name] = convert(key, text)
        return replace(self, **changes)


def convert(key: str, text: str) -> Any:
    """A Kafka-named setting's value from its text (flags, env, server.properties)."""
    text = text.strip()
    if key == "sasl.oauthbearer.jwks.endpoint.url":
        return jwks_url(text) if text else None
    if key == "sasl.oauthbearer.expected.issuer":
        return text or None
    if key == "sasl.oauthbearer.expected.audience":
        return audience_list(text)
    if key in ("sasl.oauthbearer.sub.claim.name", "sasl.oauthbearer.scope.claim.name"):
        if not text:
            raise OAuthBearerConfigError(f"{key} must name a claim")
        return text
    try:
        number = int(text)
    except ValueError:
        raise OAuthBearerConfigError(f"{key}: expected an integer, got {text!r}") from None
    if number < (0 if key.endswith("skew.seconds") else 1):
        raise OAuthBearerConfigError(f"{key}: {number} is too small")
    return number


def audience_list(text: str) -> tuple[str, ...]:
    """sasl.oauthbearer.expected.audience: a comma-separated list (Kafka's LIST type)."""
    return tuple(a.strip() for a in text.split(",") if a.strip())


def jwks_url(text: str) -> str:
    """sasl.oauthbearer.jwks.endpoint.url: https://, http:// or file: (a JWKS file)."""
    parsed = urllib.parse.urlparse(text.strip())
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return text.strip()
    if parsed.scheme == "file" and parsed.path:
        path = Path(urllib.parse.unquote(parsed.path))
        if not path.is_file():
            raise OAuthBearerConfigError(f"JWKS file {path} does not exist")
        return text.strip()
    raise OAuthBearerConfigError(
        f"expected an https://, http:// or file: URL of a JWKS, got {text.strip()!r}"
    )


def check(settings: Settings, sasl_listeners: list[str]) -> None:
    """Raise OAuthBearerConfigError (a ValueError) where a SASL listener enables
    OAUTHBEARER without a JWKS (it could authenticate no one; Kafka would fall back to
    its unsecured validator) or with a per-listener setting that cannot work."""
    for listener in sasl_listeners:
        if MECHANISM not in enabled_mechanisms(settings, listener):
            continue
        try:
            listener_settings = OAuthBearerSettings.for_listener(settings, listener)
        except OAuthBearerConfigError as exc:
            raise OAuthBearerConfigError(f"listener {listener}: {exc}") from None
        if not listener_settings.jwks_endpoint_url:
            raise OAuthBearerConfigError(
                f"OAUTHBEARER is enabled on listener {listener} without "
                "sasl.oauthbearer.jwks.endpoint.url (--sasl-oauthbearer-jwks-endpoint-url): "
                "Skiff accepts only signed tokens"
            )


class TokenRefused(Exception):
    """Why a token was refused (names the problem, never holds the token)."""


# -- the JWKS --------------------------------------------------------------------------


def _read_jwks(url: str) -> bytes:
    """The JWKS document (blocking: runs in a worker thread)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        with open(urllib.parse.unquote(parsed.path), "rb") as f:
            return f.read(JWKS_MAX_BYTES + 1)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=JWKS_FETCH_TIMEOUT_S) as response:  # noqa: S310
        return bytes(response.read(JWKS_MAX_BYTES + 1))


def _parse_jwks(data: bytes) -> dict[str, jwt.PyJWK]:
    """kid -> key, for the keys usable with ALLOWED_ALGORITHMS (others are skipped)."""
    if len(data) > JWKS_MAX_BYTES:
        raise ValueError(f"the JWKS is larger than {JWKS_MAX_BYTES} bytes")
    document = json.loads(data)
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError('the JWKS is not a JSON object with a "keys" list')
    keys: dict[str, jwt.PyJWK] = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("kty") not in ("RSA", "EC"):
            continue
        if entry.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue
        keys[str(entry.get("kid", ""))] = key
    return keys


class Jwks:
    """The keys of sasl.oauthbearer.jwks.endpoint.url, fetched off the event loop,
    refreshed every jwks_endpoint_refresh_ms (in the background: validations keep using
    the keys they have) and at once on an unknown kid (at most once per
    UNKNOWN_KID_REFRESH_FLOOR_S). A failed fetch is retried in the background after
    retry_backoff_ms, doubling up to retry_backoff_max_ms, until one works; meanwhile
    the back-off alone decides when the identity provider is asked again."""

    def __init__(
        self,
        url: str,
        refresh_ms: int,
        kid_floor_s: float = UNKNOWN_KID_REFRESH_FLOOR_S,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 10_000,
    ) -> None:
        self.url = url
        self.refresh_s = refresh_ms / 1000
        self.kid_floor_s = kid_floor_s
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.retry_backoff_max_s = max(retry_backoff_max_ms, 1) / 1000
        self.keys: dict[str, jwt.PyJWK] = {}
        self.fetched_at: float | None = None  # monotonic time of the last attempt
        self._refreshing: asyncio.Task[None] | None = None
        self._retrying: asyncio.Task[None] | None = None  # the back-off loop, while failing
        self._failed = False  # the last attempt failed (logged once until it works)

    async def key(self, kid: str) -> jwt.PyJWK:
        now = time.monotonic()
        if self.fetched_at is None:
            await self.refresh()
        elif now - self.fetched_at >= self.refresh_s:
            self._start_refresh()  # keep serving the keys we have meanwhile
        key = self.keys.get(kid)
        if key is None and not kid and len(self.keys) == 1:
            key = next(iter(self.keys.values()))  # a token without kid, a JWKS of one key
        if key is None and self.fetched_at is not None:
            if self._backing_off():
                if self._refreshing is not None and not self._refreshing.done():
                    await asyncio.shield(self._refreshing)  # an attempt under way
                    key = self.keys.get(kid)
            elif time.monotonic() - self.fetched_at >= self.kid_floor_s:
                await self.refresh()
                key = self.keys.get(kid)
            elif self._refreshing is not None:
                await asyncio.shield(self._refreshing)
                key = self.keys.get(kid)
        if key is None:
            if not self.keys:
                raise TokenRefused(f"no signing keys available from the JWKS at {self.url}")
            raise TokenRefused(f"no key with kid {kid[:64]!r} in the JWKS")
        return key

    def _backing_off(self) -> bool:
        return self._retrying is not None and not self._retrying.done()

    def _start_refresh(self) -> None:
        if self._backing_off():
            return  # the back-off loop fetches
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.get_running_loop().create_task(self._refresh())

    async def refresh(self) -> None:
        """Fetch now (joining a fetch already under way)."""
        self._start_refresh()
        if self._refreshing is not None:
            await asyncio.shield(self._refreshing)

    async def _retry(self) -> None:
        delay = min(self.retry_backoff_s, self.retry_backoff_max_s)
        while self._failed:
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.retry_backoff_max_s)
            self._refreshing = asyncio.get_running_loop().create_task(self._refresh())
            await asyncio.shield(self._refreshing)

    async def _refresh(self) -> None:
        self.fetched_at = time.monotonic()
        try:
            data = await asyncio.to_thread(_read_jwks, self.url)
            keys = _parse_jwks(data)
        except Exception as exc:  # noqa: BLE001 - any failure keeps the keys we had
            if not self._failed:  # once per failure burst
                _log.warning(
                    "cannot load the OAUTHBEARER JWKS from %s: %s; keeping %d known key(s), "
                    "retrying after %g s, doubling up to %g s",
                    self.url,
                    exc,
                    len(self.keys),
                    self.retry_backoff_s,
                    self.retry_backoff_max_s,
                )
            self._failed = True
            if not self._backing_off():
                self._retrying = asyncio.get_running_loop().create_task(self._retry())
            return
        if self._failed or set(keys) != set(self.keys):
            _log.info("OAUTHBEARER JWKS from %s: key ids %s", self.url, sorted(keys))
        self._failed = False
        self.keys = keys


# -- tokens ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ValidToken:
    principal_name: str
    expires_at: float  # seconds since the epoch (the exp claim)
    scopes: frozenset[str] = frozenset()  # from sasl.oauthbearer.scope.claim.name


class JwtValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler: one per listener configuration."""

    def __init__(self, settings: OAuthBearerSettings) -> None:
        if not settings.jwks_endpoint_url:
            raise OAuthBearerConfigError(
                "OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (Skiff does not accept "
                "unsecured tokens)"
            )
        self.settings = settings
        self.jwks = Jwks(
            settings.jwks_endpoint_url,
            settings.jwks_endpoint_refresh_ms,
            retry_backoff_ms=settings.jwks_endpoint_retry_backoff_ms,
            retry_backoff_max_ms=settings.jwks_endpoint_retry_backoff_max_ms,
        )

    async def validate(self, token: str) -> ValidToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"malformed JWT: {exc}") from None
        alg = header.get("alg")
        if alg not in ALLOWED_ALGORITHMS:
            allowed = ", ".join(ALLOWED_ALGORITHMS)
            raise TokenRefused(f"JWT algorithm {str(alg)[:16]!r} refused (allowed: {allowed})")
        kid = header.get("kid", "")
        key = await self.jwks.key(kid if isinstance(kid, str) else "")
        s = self.settings
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=list(s.expected_audience) or None,
                issuer=s.expected_issuer,
                leeway=s.clock_skew_seconds,
                options={
                    "require": ["exp", "iat"],
                    "verify_aud": bool(s.expected_audience),
                    "verify_iss": s.expected_issuer is not None,
                },
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("the JWT has expired (exp)") from None
        except jwt.ImmatureSignatureError as exc:
            raise TokenRefused(f"the JWT is not valid yet ({exc})") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused(
                f"the JWT's audience (aud) is not one of {', '.join(s.expected_audience)}"
            ) from None
        except jwt.InvalidIssuerError:
            raise TokenRefused(f"the JWT's issuer (iss) is not {s.expected_issuer}") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("the JWT's signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise TokenRefused(f"invalid JWT: {exc}") from None
        name = claims.get(s.sub_claim_name)
        if not isinstance(name, str) or not name.strip():
            raise TokenRefused(f"the JWT has no {s.sub_claim_name!r} claim naming the principal")
        return ValidToken(name, float(claims["exp"]), _scopes(claims, s.scope_claim_name))


def _scopes(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    """The token's scopes as Kafka's BrokerJwtValidator reads them: a string claim is one
    scope, a list is several, anything else (or no claim) none; a scope must not be
    empty."""
    raw = claims.get(name)
    values = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    scopes = set()
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise TokenRefused(f"the JWT's {name!r} claim holds an empty or non-string scope")
        scopes.add(value.strip())
    return frozenset(scopes)


def parse_client_first(message: bytes) -> tuple[str, str | None, dict[str, str]]:
    """(token, authzid or None, extensions) of `n,a=..,\\x01auth=Bearer <jwt>\\x01..\\x01`."""
    match = _CLIENT_FIRST.fullmatch(message)
    if match is None:
        raise ValueError("malformed OAUTHBEARER client first message (RFC 7628)")
    pairs: dict[str, str] = {}
    for pair in match["pairs"].split(b"\x01")[:-1]:
        key, _, value = pair.decode("ascii").partition("=")
        pairs[key] = value
    auth = _AUTH.fullmatch(pairs.pop("auth", ""))
    if auth is None or auth["scheme"].lower() != "bearer":
        raise ValueError("OAUTHBEARER client first message without auth=Bearer <token>")
    authzid = match["authzid"]
    name = authzid.decode("ascii").replace("=2C", ",").replace("=3D", "=") if authzid else None
    return auth["token"], name, pairs


# -- the mechanism ---------------------------------------------------------------------


class OAuthBearerServer:
    """One OAUTHBEARER exchange (Kafka's OAuthBearerSaslServer)."""

    mechanism = MECHANISM

    def __init__(self, validator: JwtValidator | None, security: ConnectionSecurity) -> None:
        self.validator = validator
        self.security = security
        self._principal: KafkaPrincipal | None = None
        self._expires_at: float | None = None
        self._error: str | None = None  # why the token was refused, once challenged
        self.extensions: dict[str, str] = {}
        self.scopes: frozenset[str] = frozenset()

    async def evaluate(self, response: bytes) -> bytes:
        if self._error is not None:
            # The client's %x01 after our error challenge: the exchange fails.
            raise SaslAuthenticationFailed(
                f"{INVALID_TOKEN.decode()}: OAUTHBEARER token refused: {self._error}"
            )
        if self._principal is not None:
            raise ValueError("OAUTHBEARER exchange already complete")
        token, authzid, self.extensions = parse_client_first(response)
        if self.validator is None:
            return self._refuse(
                "OAUTHBEARER is not configured (sasl.oauthbearer.jwks.endpoint.url)"
            )
        try:
            valid = await self.validator.validate(token)
        except TokenRefused as exc:
            return self._refuse(str(exc))
        if authzid and authzid != valid.principal_name:
            raise SaslAuthenticationFailed(
                f"OAUTHBEARER authorization id {authzid!r} differs from the token's principal "
                f"{valid.principal_name!r}"
            )
        self._principal = KafkaPrincipal("User", valid.principal_name)
        self._expires_at = valid.expires_at
        self.scopes = valid.scopes
        _log.debug(
            "OAUTHBEARER token of %s from %s: scopes %s",
            valid.principal_name,
            self.security.peer_host,
            sorted(valid.scopes),
        )
        return b""

    def _refuse(self, reason: str) -> bytes:
        _log.warning(
            "OAUTHBEARER authentication from %s on listener %s refused: %s",
            self.security.peer_host,
            self.security.listener,
            reason,
        )
        self._error = reason
        return INVALID_TOKEN

    @property
    def complete(self) -> bool:
        return self._principal is not None

    @property
    def principal(self) -> KafkaPrincipal | None:
        return self._principal

    @property
    def lifetime_ms(self) -> int | None:
        if self._expires_at is None:
            return None
        return max(0, int((self._expires_at - time.time()) * 1000))


def validator_for(broker: Broker, listener: str) -> JwtValidator | None:
    """The listener's validator, one per broker and listener (it holds the JWKS)."""
    validators: dict[str, JwtValidator | None] = broker.sasl_state.setdefault(MECHANISM, {})
    if listener not in validators:
        settings = OAuthBearerSettings.for_listener(broker.settings, listener)
        try:
            validators[listener] = JwtValidator(settings)
        except OAuthBearerConfigError as exc:
            _log.error("OAUTHBEARER on listener %s cannot authenticate anyone: %s", listener, exc)
            validators[listener] = None
    return validators[listener]


async def prepare(broker: Broker, listeners: list[tuple[str, str]]) -> None:
    """At start-up, fetch the JWKS of each (name, protocol) listener that serves
    OAUTHBEARER, so the first client does not wait for it and an unreachable JWKS is
    logged before any client comes (start-up goes on: the fetch is retried)."""
    for name, protocol in listeners:
        if protocol.startswith("SASL_") and MECHANISM in enabled_mechanisms(broker.settings, name):
            validator = validator_for(broker, name)
            if validator is not None:
                await validator.jwks.refresh()


def _factory(broker: Broker, security: ConnectionSecurity) -> OAuthBearerServer:
    return OAuthBearerServer(validator_for(broker, security.listener), security)


register(MECHANISM, _factory)
