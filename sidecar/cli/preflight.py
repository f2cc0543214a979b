"""`skiff serve`'s start-up checks: what a user can get wrong on the command line is
found before anything starts, and reported as one line saying what to do (exit status
2), instead of as a traceback from deep inside start-up or, with --workers, as a worker
that dies and is restarted forever."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from sidecar.config.settings import HostPort, Settings
from sidecar.telemetry.redact import redact_text, redact_url, url_secrets

REDIS_SCHEMES = (
    "redis",
    "rediss",
    "unix",
    "redis+sentinel",
    "rediss+sentinel",
    "redis+cluster",
    "rediss+cluster",
)


UNIX_PATH_MAX = 107  # sun_path is 108 bytes on Linux, NUL included


class Mistake(ValueError):
    """A start-up setting that cannot work; the message says what to do."""


def check_redis_url(url: str) -> None:
    """Parse the URL as the Redis client will, so a malformed one fails here."""
    scheme = url.partition("://")[0] if "://" in url else ""
    if scheme not in REDIS_SCHEMES:
        raise Mistake(
            f"--redis-url {redact_url(url)!r} is not a Redis URL: use "
            + ", ".join(f"{s}://" for s in REDIS_SCHEMES)
            + " (e.g. redis://HOST:6379/0), or leave it out for the embedded redis-server"
        )
    from redis.asyncio.connection import parse_url

    from sidecar.storage.cluster_client import CLUSTER_SCHEMES, parse_cluster_url
    from sidecar.storage.connection import SENTINEL_SCHEMES, parse_sentinel_url

    try:
        if scheme in SENTINEL_SCHEMES:
            parse_sentinel_url(url)
        elif scheme in CLUSTER_SCHEMES:
            parse_cluster_url(url)
        else:
            parse_url(url)
    except (ValueError, TypeError) as exc:
        reason = redact_text(str(exc), url_secrets(url))
        raise Mistake(
            f"--redis-url {redact_url(url)!r} is malformed ({reason}); see docs/operations.md "
            "for the URL forms"
        ) from None


def check_data_dir(path: Path) -> None:
    """The embedded redis-server's directory must be creatable and writable."""
    what = f"--data-dir {str(path)!r}"
    if path.exists() and not path.is_dir():
        raise Mistake(f"{what} is a file, not a directory: pick another --data-dir")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise Mistake(
            f"{what} cannot be created ({exc.strerror or exc}): pick a --data-dir you can write"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise Mistake(f"{what} is not writable: pick a --data-dir you can write")
    sock = path.resolve() / "redis.sock"  # the embedded redis-server's unix socket
    if len(os.fsencode(sock)) > UNIX_PATH_MAX:
        raise Mistake(
            f"{what} is too deep: the embedded Redis socket {sock} would be longer than "
            f"{UNIX_PATH_MAX} bytes; pick a shorter --data-dir"
        )


def _check_port(hp: HostPort, flag: str, kind: int) -> None:
    """Bind as the server will (SO_REUSEADDR, as asyncio does), then let go."""
    try:
        infos = socket.getaddrinfo(hp.host or None, hp.port, type=kind, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise Mistake(
            f"{flag} {hp}: cannot resolve {hp.host!r} ({exc}): use an address of this host"
        ) from None
    for family, socktype, proto, _, addr in infos[:1]:
        with socket.socket(family, socktype, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(addr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    hint = "stop what uses it or pick another port"
                elif exc.errno == errno.EADDRNOTAVAIL:
                    hint = "use an address of this host, e.g. 0.0.0.0 or 127.0.0.1"
                elif exc.errno == errno.EACCES:
                    hint = "ports below 1024 need privileges: pick a higher port"
                else:
                    hint = "pick another address"
                raise Mistake(f"{flag} {hp}: {exc.strerror or exc}; {hint}") from None


def check_ports(settings: Settings, workers: int) -> None:
    """Every address the sidecar (each worker: the ports + i) will listen on is free."""
    for index in range(workers):
        suffix = f" (worker {index}: the port + {index})" if workers > 1 else ""
        kafka = [(f"--listeners {e.name}", e.address) for e in settings.listeners]
        for flag, hp, kind in (
            *((f, a, socket.SOCK_STREAM) for f, a in kafka or [("--listen", settings.listen)]),
            ("--http-listen", settings.http_listen, socket.SOCK_STREAM),
            ("--udp-listen", settings.udp_listen if index == 0 else None, socket.SOCK_DGRAM),
        ):
            if hp is None or (hp.port == 0 and index > 0):
                continue
            port = hp.port + index if hp.port else 0
            if port > 65535:
                raise Mistake(
                    f"{flag}{suffix}: port {port} is above 65535: use fewer --workers "
                    "or a lower port"
                )
            _check_port(HostPort(hp.host, port), flag + suffix, kind)


def check(settings: Settings, workers: int) -> None:
    """Raises Mistake for the first setting that cannot work."""
    if settings.redis_url is not None:
        check_redis_url(settings.redis_url)
    else:
        check_data_dir(settings.data_dir)
    check_ports(settings, workers)
