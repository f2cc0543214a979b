"""Who calls the HTTP endpoint (--http-auth) and what it may do there.

Authentication: `Authorization: Basic` with the users SASL knows (a PLAIN users file,
or a SCRAM credential in Redis, checked by recomputing the stored key from the password
with the credential's salt and iterations), or `Authorization: Bearer <JWT>` validated
as the OAUTHBEARER mechanism validates tokens. Missing or wrong credentials: 401 with
`WWW-Authenticate` challenges and no hint of what was wrong (the log line says which
user failed, never the password or token). Paths in --http-open-paths (probes,
/metrics) need no credentials; a request there without any is User:ANONYMOUS.

Authorization: the queue API's handlers (sidecar/queues/http_api.py) ask
`broker.authorizer` for the operations Kafka would check for the same action through a
Kafka client (`require`); a refusal is 403 with Kafka's error name.

Credentials sent over plain HTTP can be read by anyone on the path, so --http-auth
without TLS (--http-ssl-*) is refused at start-up unless --http-auth-allow-plaintext."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import secrets
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from sidecar.security import tls
from sidecar.security.authorizer import Operation, ResourceType
from sidecar.security.principal import ANONYMOUS, KafkaPrincipal
from sidecar.security.sasl import oauthbearer
from sidecar.security.sasl.plain import configured_users
from sidecar.security.session import ConnectionSecurity
from sidecar.storage.resilience import RedisUnavailable
from sidecar.storage.scram_store import MIN_ITERATIONS, ScramCredential, ScramStore

if TYPE_CHECKING:
    from sidecar.config.settings import Settings

log = logging.getLogger("skiff.http.auth")

LISTENER = "HTTP"  # ConnectionSecurity.listener of HTTP callers (ACL host matching works)
REALM = "skiff"
SECURITY_KEY = "skiff.security"  # request[SECURITY_KEY]: the caller's ConnectionSecurity
CACHE_SIZE = 4096  # verified (user, password) pairs kept, so PBKDF2 runs once per pair
CACHE_S = 300.0
MAX_CONCURRENT_PBKDF2 = 4  # password hashing is CPU work: bounded, off the event loop

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class InvalidCredentials(Exception):
    """The credentials were refused; the message names no secret (it is logged)."""


class PasswordVerifier(Protocol):
    """True when `password` is `user`'s; None when this source has no such user."""

    async def __call__(self, user: str, password: str) -> bool | None: ...


class TokenVerifier(Protocol):
    """The principal a bearer token stands for; raises InvalidCredentials."""

    async def __call__(self, token: str) -> KafkaPrincipal: ...


class PlainUsers:
    """Basic credentials checked against the PLAIN users SASL has (--sasl-plain-users-file,
    the JAAS user_NAME list of server.properties), as the PLAIN mechanism does."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    async def __call__(self, user: str, password: str) -> bool | None:
        users = configured_users(self.settings, LISTENER)
        if users is None or user not in users:
            return None
        return hmac.compare_digest(users[user].encode(), password.encode())


# A credential no password matches, hashed for unknown users (MIN_ITERATIONS, as the
# cheapest real credential costs).
_DECOY = ScramCredential(secrets.token_bytes(16), b"", b"", MIN_ITERATIONS)


class ScramPasswords:
    """Basic credentials checked against the user's SCRAM credentials in Redis (the
    password salted with the stored salt and iterations must give the stored key;
    SCRAM-SHA-512 first). PBKDF2 costs milliseconds, so a pair that matched is
    remembered (keyed by a keyed hash of the password, with the stored key it matched)
    and the next request only re-reads the credential: a changed or deleted credential
    takes effect at once."""

    def __init__(self, store: ScramStore) -> None:
        self.store = store
        self._key = secrets.token_bytes(32)  # per process: the cache holds no password hash
        self._verified: dict[tuple[str, bytes], tuple[bytes, float]] = {}
        self._hashing = asyncio.Semaphore(MAX_CONCURRENT_PBKDF2)

    async def __call__(self, user: str, password: str) -> bool | None:
        credentials = await self.store.user(user)
        if not credentials:
            # As long as a wrong password: the answer's timing tells no one which users exist.
            async with self._hashing:
                await asyncio.to_thread(_DECOY.matches_password, "SCRAM-SHA-512", password)
            return None
        tag = hmac.new(self._key, password.encode(), hashlib.sha256).digest()
        now = time.monotonic()
        seen = self._verified.get((user, tag))
        if seen is not None and seen[1] > now:
            if any(hmac.compare_digest(seen[0], c.stored_key) for c in credentials.values()):
                return True
        for mechanism, credential in sorted(credentials.items(), reverse=True):
            async with self._hashing:
                ok = await asyncio.to_thread(credential.matches_password, mechanism, password)
            if ok:
                if len(self._verified) >= CACHE_SIZE:
                    self._verified.clear()  # rare; bounded memory beats an LRU here
                self._verified[(user, tag)] = (credential.stored_key, now + CACHE_S)
                return True
        return False


@dataclass(slots=True)
class Verifiers:
    passwords: list[PasswordVerifier]
    token: TokenVerifier | None


class NotAuthorized(Exception):
    """403: the caller lacks an ACL; `code` is Kafka's error name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_REFUSAL = {
    ResourceType.TOPIC: "TOPIC_AUTHORIZATION_FAILED",
    ResourceType.GROUP: "GROUP_AUTHORIZATION_FAILED",
    ResourceType.CLUSTER: "CLUSTER_AUTHORIZATION_FAILED",
}


def security_of(request: web.Request) -> ConnectionSecurity:
    security = request.get(SECURITY_KEY)
    if security is None:  # an app without HttpSecurity's middleware (tests of routes)
        security = ConnectionSecurity(LISTENER, "PLAINTEXT", request.remote or "")
    return security


def allowed(
    broker: Any, request: web.Request, operation: Operation, kind: ResourceType, name: str
) -> bool:
    return bool(broker.authorizer.authorize(security_of(request), operation, kind, name))


def require(
    broker: Any, request: web.Request, operation: Operation, kind: ResourceType, name: str
) -> None:
    """Raises NotAuthorized unless the caller may do `operation` on the resource."""
    if not allowed(broker, request, operation, kind, name):
        what = "the cluster" if kind is ResourceType.CLUSTER else f"{kind.name.lower()} {name!r}"
        raise NotAuthorized(
            _REFUSAL.get(kind, "CLUSTER_AUTHORIZATION_FAILED"),
            f"{security_of(request).principal} may not {operation.name} {what}",
        )


def _json_error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


class HttpSecurity:
    """The HTTP listener's authentication (a middleware) and TLS."""

    def __init__(self, settings: Settings, verifiers: Verifiers) -> None:
        self.settings = settings
        self.schemes = frozenset(settings.http_auth)
        self.open_paths = frozenset(settings.http_open_paths)
        self.verifiers = verifiers
        found = tls_settings(settings)
        self.https = HttpTls(found) if found is not None else None
        self.tls = self.https.context if self.https is not None else None
        self.protocol = "SSL" if self.https is not None else "PLAINTEXT"
        self.login: Any = None  # the console's ConsoleLogin, set by telemetry/http.py

    def start(self) -> None:
        """Watch the TLS files (needs the running loop)."""
        if self.https is not None:
            self.https.start()

    async def stop(self) -> None:
        if self.https is not None:
            await self.https.stop()

    @property
    def enabled(self) -> bool:
        return bool(self.schemes)

    def describe(self) -> str:
        """The start-up log line's part about security."""
        scheme = "https" if self.tls is not None else "http"
        if not self.enabled:
            return f"{scheme}, no authentication (--http-auth none): every caller is User:ANONYMOUS"
        opened = ", ".join(sorted(self.open_paths)) or "none"
        return f"{scheme}, credentials {'+'.join(sorted(self.schemes))}; open paths: {opened}"

    def challenges(self, bad_token: bool = False) -> list[str]:
        out = []
        if "basic" in self.schemes:
            out.append(f'Basic realm="{REALM}", charset="UTF-8"')
        if "bearer" in self.schemes:
            error = ', error="invalid_token"' if bad_token else ""
            out.append(f'Bearer realm="{REALM}"{error}')
        return out

    def _unauthorized(self, message: str, bad_token: bool = False) -> web.Response:
        response = _json_error(401, "AUTHENTICATION_FAILED", message)
        for challenge in self.challenges(bad_token):
            response.headers.add("WWW-Authenticate", challenge)
        return response

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization")
        principal = ANONYMOUS
        if self.enabled and header is None and self.login is not None:
            # the console's login form and session cookie (sidecar/console/login.py)
            admitted = await self.login.admit(request, self)
            if isinstance(admitted, web.StreamResponse):
                return admitted
            principal = admitted or principal
            session = admitted is not None
        else:
            session = False
        if (
            self.enabled
            and not session
            and (header is not None or request.path not in self.open_paths)
        ):
            if header is None:
                return self._unauthorized(
                    "credentials required: " + " or ".join(self._accepted()) + " (docs/security.md)"
                )
            scheme, _, value = header.partition(" ")
            scheme = scheme.lower()
            try:
                if scheme not in self.schemes:
                    raise InvalidCredentials(f"scheme {scheme[:20]!r} not accepted")
                principal = await self._authenticate(scheme, value.strip())
            except InvalidCredentials as exc:
                log.info(
                    "HTTP %s %s from %s refused: %s",
                    request.method,
                    request.path,
                    request.remote,
                    exc,
                )
                return self._unauthorized("authentication failed", bad_token=scheme == "bearer")
            except RedisUnavailable as exc:  # SCRAM credentials live in Redis
                return _json_error(503, "REDIS_UNAVAILABLE", str(exc))
        request[SECURITY_KEY] = ConnectionSecurity(
            LISTENER, self.protocol, request.remote or "", principal
        )
        return await handler(request)

    def _accepted(self) -> list[str]:
        names = {"basic": "HTTP Basic (a SASL user)", "bearer": "a Bearer JWT"}
        return [names[s] for s in sorted(self.schemes)]

    async def _authenticate(self, scheme: str, value: str) -> KafkaPrincipal:
        if scheme == "bearer":
            if self.verifiers.token is None or not value:
                raise InvalidCredentials("no bearer token validator")
            return await self.verifiers.token(value)
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidCredentials("malformed Basic credentials") from None
        user, sep, password = decoded.partition(":")
        if not sep or not user:
            raise InvalidCredentials("malformed Basic credentials")
        return await self.check_password(user, password)

    async def check_password(self, user: str, password: str) -> KafkaPrincipal:
        """User:`user` if the password is theirs (Basic's check, also the console's login
        form); raises InvalidCredentials otherwise."""
        for verify in self.verifiers.passwords:
            verdict = await verify(user, password)
            if verdict is True:
                return KafkaPrincipal("User", user)
            if verdict is False:
                break  # the source that knows the user said no
        raise InvalidCredentials(f"wrong password or unknown user {user[:100]!r}")


class HttpSecurityMistake(ValueError):
    """An --http-* setting that cannot work; the message says what to do."""


def check(settings: Settings) -> None:
    """Start-up checks (sidecar/cli/preflight.py): raises HttpSecurityMistake."""
    if "bearer" in settings.http_auth and settings.http_listen is not None:
        bearer = oauthbearer.OAuthBearerSettings.for_listener(settings, LISTENER)
        if not bearer.jwks_endpoint_url:
            raise HttpSecurityMistake(
                "--http-auth bearer needs --sasl-oauthbearer-jwks-endpoint-url "
                "(sasl.oauthbearer.jwks.endpoint.url): tokens are checked against its keys"
            )
    if settings.http_auth and settings.http_listen is not None:
        if not _has_tls(settings) and not settings.http_auth_allow_plaintext:
            raise HttpSecurityMistake(
                "--http-auth needs TLS so passwords and tokens are not sent in clear: set "
                "--http-ssl-keystore-location (or --http-ssl-keystore-certificate-location "
                "and --http-ssl-keystore-key-location), or --http-auth-allow-plaintext true "
                "when a TLS proxy sits in front"
            )
    try:
        found = tls_settings(settings)
        if found is not None:
            tls.build_context(found)
    except ValueError as exc:  # TlsConfigError names the file and what to change
        raise HttpSecurityMistake(f"--http-ssl-*: {exc}") from None


def _has_tls(settings: Settings) -> bool:
    return bool(
        settings.http_ssl_keystore_location or settings.http_ssl_keystore_certificate_location
    )


def tls_settings(settings: Settings) -> tls.TlsSettings | None:
    """The HTTP listener's TLS (--http-ssl-*, PEM files as the Kafka listeners' ssl.*
    ones, TLS 1.2+), or None for plain HTTP. Raises ValueError."""
    if not _has_tls(settings):
        if settings.http_ssl_keystore_key_location is not None:
            raise ValueError(
                "--http-ssl-keystore-key-location needs --http-ssl-keystore-certificate-location"
            )
        return None
    if settings.http_ssl_keystore_certificate_location is not None:
        if settings.http_ssl_keystore_key_location is None:
            raise ValueError(
                "--http-ssl-keystore-certificate-location needs --http-ssl-keystore-key-location"
            )
        if settings.http_ssl_keystore_location is not None:
            raise ValueError(
                "give --http-ssl-keystore-location or --http-ssl-keystore-certificate-location "
                "+ --http-ssl-keystore-key-location, not both"
            )
    return tls.TlsSettings(
        listener=LISTENER,
        keystore=settings.http_ssl_keystore_location,
        certificate=settings.http_ssl_keystore_certificate_location,
        key=settings.http_ssl_keystore_key_location,
        key_password=settings.http_ssl_key_password,
    )


class HttpTls:
    """The HTTP listener's TLS, reloaded when its files change (cert-manager rotates
    them) by the Kafka listeners' ServerTls. aiohttp keeps the context it was given, so
    that first context's SNI callback (OpenSSL runs it for every ClientHello, with or
    without a server name) hands each new connection the current one."""

    def __init__(self, settings: tls.TlsSettings) -> None:
        self.server = tls.ServerTls(settings)
        self.context = self.server.context
        self.context.sni_callback = self._current

    def _current(self, connection: ssl.SSLObject, name: str | None, _: ssl.SSLContext) -> None:
        if self.server.context is not self.context:
            connection.context = self.server.context

    def start(self) -> None:
        self.server.start()

    async def stop(self) -> None:
        await self.server.stop()


def verifiers_for(broker: Any) -> Verifiers:
    """The password sources and token validator of the SASL mechanisms: the PLAIN users
    first (a user there is decided there), then SCRAM credentials."""
    token = None
    if "bearer" in broker.settings.http_auth:
        validator = oauthbearer.validator_for(broker, LISTENER)
        if validator is not None:
            token = BearerTokens(validator)
    return Verifiers(
        passwords=[PlainUsers(broker.settings), ScramPasswords(ScramStore(broker.store.redis))],
        token=token,
    )


class BearerTokens:
    """Bearer tokens validated by the OAUTHBEARER mechanism's validator (its JWKS,
    issuer, audience, clock skew and principal claim: the sasl.oauthbearer.* settings)."""

    def __init__(self, validator: oauthbearer.JwtValidator) -> None:
        self.validator = validator

    async def __call__(self, token: str) -> KafkaPrincipal:
        try:
            valid = await self.validator.validate(token)
        except oauthbearer.TokenRefused as exc:
            raise InvalidCredentials(f"bearer token refused: {exc}") from None
        return KafkaPrincipal("User", valid.principal_name)
