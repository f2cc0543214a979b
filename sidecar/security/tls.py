"""TLS for SSL and SASL_SSL listeners: the server's SSLContext built from PEM files
(Kafka's `ssl.*` settings, per listener), rebuilt when the files change (cert-manager
rotates them: new connections get the new certificate, open ones keep theirs), and the
handshake of each connection, done before the Kafka connection sees any byte so that a
failed one is one log line and a closed socket, never a Kafka request.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from sidecar.config.listeners import Listener, setting_for
from sidecar.config.settings import Settings
from sidecar.security.principal import ANONYMOUS, KafkaPrincipal
from sidecar.security.ssl_principal import NoMatchingRule, PrincipalMapper, distinguished_name
from sidecar.telemetry.logs import RateLimitedLog

log = logging.getLogger("skiff.tls")
_refusals = RateLimitedLog(log)

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
RELOAD_CHECK_S = 1.0  # how often the PEM files' modification times are looked at


class TlsConfigError(ValueError):
    """A TLS setting that cannot work; the message says which and what to change."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """One listener's TLS settings, Kafka's names in the comments."""

    listener: str
    keystore: Path | None = None  # ssl.keystore.location: PEM key + certificate chain
    certificate: Path | None = None  # ssl.keystore.certificate.location (Skiff's)
    key: Path | None = None  # ssl.keystore.key.location (Skiff's)
    key_password: str | None = field(default=None, repr=False)  # ssl.key.password
    truststore: Path | None = None  # ssl.truststore.location: PEM CA bundle
    client_auth: str = "none"  # ssl.client.auth
    protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")  # ssl.enabled.protocols
    principal_rules: str = "DEFAULT"  # ssl.principal.mapping.rules

    def files(self) -> tuple[Path, ...]:
        found = (self.keystore, self.certificate, self.key, self.truststore)
        return tuple(p for p in found if p is not None)


def listener_tls(settings: Settings, listener: Listener) -> TlsSettings:
    """The TLS settings of `listener`: `listener.name.<l>.ssl.*` from the config file
    over the broker-wide `ssl.*` ones. Raises TlsConfigError."""

    def get(name: str, default: str | None) -> str | None:
        value = setting_for(settings, listener.name, name, default)
        return value if value else None

    def path(name: str, default: Path | None) -> Path | None:
        value = get(name, str(default) if default else None)
        return Path(value) if value else None

    where = f"listener {listener.name} ({listener.protocol})"
    # A listener that names its own key material uses only that, not the broker-wide one.
    own = {key for name, key, _ in settings.listener_overrides if name == listener.name}
    keystore_keys = {
        "ssl.keystore.location": settings.ssl_keystore_location,
        "ssl.keystore.certificate.location": settings.ssl_keystore_certificate_location,
        "ssl.keystore.key.location": settings.ssl_keystore_key_location,
    }
    if own & keystore_keys.keys():
        keystore_keys = dict.fromkeys(keystore_keys)
    keystore_type = (get("ssl.keystore.type", settings.ssl_keystore_type) or "PEM").upper()
    if keystore_type != "PEM":
        raise TlsConfigError(
            f"{where}: ssl.keystore.type {keystore_type} is not supported: Skiff reads PEM "
            "files (convert a JKS/PKCS12 keystore with keytool/openssl)"
        )
    tls = TlsSettings(
        listener=listener.name,
        keystore=path("ssl.keystore.location", keystore_keys["ssl.keystore.location"]),
        certificate=path(
            "ssl.keystore.certificate.location",
            keystore_keys["ssl.keystore.certificate.location"],
        ),
        key=path("ssl.keystore.key.location", keystore_keys["ssl.keystore.key.location"]),
        key_password=get("ssl.key.password", settings.ssl_key_password),
        truststore=path("ssl.truststore.location", settings.ssl_truststore_location),
        client_auth=(get("ssl.client.auth", settings.ssl_client_auth) or "none").lower(),
        protocols=tuple(
            p.strip()
            for p in (get("ssl.enabled.protocols", settings.ssl_enabled_protocols) or "").split(",")
            if p.strip()
        ),
        principal_rules=get("ssl.principal.mapping.rules", settings.ssl_principal_mapping_rules)
        or "DEFAULT",
    )
    if tls.keystore is None and (tls.certificate is None or tls.key is None):
        raise TlsConfigError(
            f"{where} needs a server certificate: ssl.keystore.location (PEM with the key "
            "and the certificate chain) or ssl.keystore.certificate.location and "
            "ssl.keystore.key.location"
        )
    if tls.keystore is not None and (tls.certificate or tls.key):
        raise TlsConfigError(
            f"{where}: give ssl.keystore.location or ssl.keystore.certificate.location + "
            "ssl.keystore.key.location, not both"
        )
    if tls.client_auth not in CLIENT_AUTH:
        raise TlsConfigError(
            f"{where}: ssl.client.auth {tls.client_auth!r}: expected none, requested or required"
        )
    unknown = [p for p in tls.protocols if p not in PROTOCOLS]
    if unknown or not tls.protocols:
        raise TlsConfigError(
            f"{where}: ssl.enabled.protocols {','.join(tls.protocols) or '(empty)'}: Skiff "
            "serves TLSv1.2 and TLSv1.3 only"
        )
    try:
        PrincipalMapper(tls.principal_rules)
    except ValueError as exc:
        raise TlsConfigError(f"{where}: {exc}") from None
    return tls


def build_context(tls: TlsSettings) -> ssl.SSLContext:
    """The server SSLContext of these settings. Raises TlsConfigError naming the file."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(PROTOCOLS[p] for p in tls.protocols)
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]
    certificate = tls.keystore or tls.certificate
    assert certificate is not None
    key_file = tls.key or certificate

    def no_password() -> str:
        # Without this OpenSSL would prompt on the terminal for an encrypted key.
        raise TlsConfigError(
            f"listener {tls.listener}: the private key in {key_file} is encrypted: set "
            "ssl.key.password"
        )

    try:
        context.load_cert_chain(certificate, tls.key, password=tls.key_password or no_password)
    except ssl.SSLError as exc:
        raise TlsConfigError(
            f"listener {tls.listener}: cannot use the key and certificate in "
            f"{', '.join(str(p) for p in (certificate, tls.key) if p)}: {_ssl_text(exc)} "
            "(a wrong ssl.key.password, or a key that does not match the certificate?)"
        ) from None
    except OSError as exc:
        raise TlsConfigError(
            f"listener {tls.listener}: cannot read {exc.filename or certificate}: "
            f"{exc.strerror or exc}"
        ) from None
    context.verify_mode = CLIENT_AUTH[tls.client_auth]
    if tls.client_auth != "none":
        try:
            if tls.truststore is not None:
                context.load_verify_locations(cafile=tls.truststore)
            else:
                context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        except (ssl.SSLError, OSError) as exc:
            raise TlsConfigError(
                f"listener {tls.listener}: cannot use ssl.truststore.location "
                f"{tls.truststore}: {_ssl_text(exc)}"
            ) from None
    return context


def _mtimes(paths: tuple[Path, ...]) -> tuple[int | None, ...]:
    out: list[int | None] = []
    for p in paths:
        try:
            st = os.stat(p)  # follows symlinks: a Kubernetes Secret swaps ..data
            out.append(st.st_mtime_ns ^ st.st_ino)
        except OSError:
            out.append(None)
    return tuple(out)


class ServerTls:
    """One listener's current SSLContext, rebuilt (in a thread) when a file changes."""

    def __init__(self, tls: TlsSettings) -> None:
        self.tls = tls
        self.mapper = PrincipalMapper(tls.principal_rules)
        self._stamp = _mtimes(tls.files())
        self.context = build_context(tls)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name=f"tls-reload-{self.tls.listener}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(RELOAD_CHECK_S)
            await self.reload_if_changed()

    async def reload_if_changed(self) -> bool:
        stamp = await asyncio.to_thread(_mtimes, self.tls.files())
        if stamp == self._stamp:
            return False
        try:
            context = await asyncio.to_thread(build_context, self.tls)
        except TlsConfigError as exc:
            # Half-written files while they are being replaced, or a bad new pair: keep
            # serving the old certificate, and try again at the next change.
            log.warning("TLS files changed but cannot be used (keeping the old ones): %s", exc)
            self._stamp = stamp
            return False
        self._stamp = stamp
        self.context = context
        log.info("listener %s: reloaded its TLS certificate and key", self.tls.listener)
        return True

    def principal(self, ssl_object: ssl.SSLObject | None) -> KafkaPrincipal:
        """Kafka's principal for an SSL connection: the mapped subject DN of a verified
        client certificate, else ANONYMOUS. Raises NoMatchingRule."""
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if not der:
            return ANONYMOUS
        return KafkaPrincipal("User", self.mapper.name(distinguished_name(der)))


class _AppProtocol(Protocol):
    """What the acceptor hands the connection to (server.KafkaConnection)."""

    security: Any

    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...
    def data_received(self, data: bytes) -> None: ...
    def eof_received(self) -> bool | None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...


class _Held(asyncio.Protocol):
    """Holds what arrives between the end of the handshake and the hand-over (a client
    may send its first request in the same flight as its Finished message)."""

    def __init__(self) -> None:
        self.data: list[bytes] = []
        self.eof = False
        self.lost: tuple[Exception | None] | None = None

    def data_received(self, data: bytes) -> None:
        self.data.append(data)

    def eof_received(self) -> bool | None:
        self.eof = True
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = (exc,)


class TlsAcceptor(asyncio.Protocol):
    """A TLS listener's connection until its handshake is done; then the application
    protocol `app()` gets the TLS transport, with the client's principal on its
    security when the listener is SSL. A failed handshake (plaintext or garbage bytes,
    an untrusted or expired client certificate, a timeout) is one warning and a closed
    socket."""

    def __init__(
        self,
        tls: ServerTls,
        app: Callable[[], _AppProtocol],
        protocol: str,
        handshake_timeout: float,
        tasks: set[asyncio.Task[None]],
        max_handshakes: int = 2**31 - 1,
    ) -> None:
        self.max_handshakes = max_handshakes
        self.tls = tls
        self.app = app
        self.protocol = protocol
        self.timeout = handshake_timeout
        self.tasks = tasks
        self.peer = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport; uvloop's are not asyncio.Transport subclasses.
        transport = cast(asyncio.Transport, transport)
        # Nothing is read until start_tls takes over (it resumes reading itself).
        transport.pause_reading()
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if len(self.tasks) >= self.max_handshakes:
            # max.connections counts connections once their handshake is done; this
            # bounds the ones still shaking hands (each holds an SSL object and a task).
            transport.abort()
            _refusals.warning(
                "closing connection %s on listener %s: %d TLS handshakes in progress "
                "(max.connections)",
                self.peer,
                self.tls.tls.listener,
                len(self.tasks),
            )
            return
        task = asyncio.create_task(self._handshake(transport), name=f"tls-{self.peer}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _handshake(self, raw: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        held = _Held()
        try:
            transport = await loop.start_tls(
                raw,
                held,
                self.tls.context,
                server_side=True,
                ssl_handshake_timeout=self.timeout,
            )
        except asyncio.CancelledError:
            raw.abort()
            raise
        except Exception as exc:  # ssl.SSLError, ConnectionError, TimeoutError, ...
            raw.abort()
            # A client that just hangs up (a TCP health check) is no fault: INFO.
            hung_up = isinstance(exc, ConnectionError) and not isinstance(
                exc, ConnectionAbortedError
            )
            level = logging.INFO if hung_up else logging.WARNING
            log.log(
                level,
                "TLS handshake with %s on listener %s failed: %s",
                self.peer,
                self.tls.tls.listener,
                _reason(exc),
                extra={"event": "tls_failed", "peer": self.peer},
            )
            return
        if transport is None:  # the client went away as the handshake ended
            raw.abort()
            return
        ssl_object = transport.get_extra_info("ssl_object")
        principal = ANONYMOUS
        if self.protocol == "SSL":
            try:
                principal = self.tls.principal(ssl_object)
            except (NoMatchingRule, ValueError) as exc:
                transport.abort()
                log.warning(
                    "TLS client %s on listener %s refused: %s",
                    self.peer,
                    self.tls.tls.listener,
                    exc,
                    extra={"event": "tls_failed", "peer": self.peer},
                )
                return
        app = self.app()
        transport.set_protocol(app)
        app.connection_made(transport)
        if self.protocol == "SSL":
            app.security.principal = principal
        log.info(
            "TLS connection from %s on listener %s: %s, principal %s",
            self.peer,
            self.tls.tls.listener,
            ssl_object.version() if ssl_object is not None else "?",
            principal,
            extra={"event": "tls", "peer": self.peer, "principal": str(principal)},
        )
        for chunk in held.data:
            app.data_received(chunk)
        if held.eof:
            app.eof_received()
        if held.lost is not None:
            app.connection_lost(held.lost[0])


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no complete handshake in time"
    if isinstance(exc, ssl.SSLError):
        reason = _ssl_text(exc)
        if exc.reason in _NOT_TLS:
            reason += " (not TLS: a plaintext client on a TLS port?)"
        return reason
    if isinstance(exc, ConnectionAbortedError) and str(exc):
        return str(exc)  # asyncio's handshake timeout
    if isinstance(exc, ConnectionError):
        return f"the client closed the connection ({exc.__class__.__name__})"
    return str(exc) or exc.__class__.__name__


_NOT_TLS = {"WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE"}


def _ssl_text(exc: BaseException) -> str:
    """An OpenSSL error without CPython's source location."""
    return re.sub(r"\s*\(_ssl\.c:\d+\)$", "", str(exc))
