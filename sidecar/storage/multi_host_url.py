"""The part Sentinel and Redis Cluster URLs share: several hosts and optional
credentials before the path, `scheme://[[user:]password@]h1:p1[,h2:p2...]/path?query`."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote


@dataclass
class MultiHostUrl:
    scheme: str
    hosts: list[tuple[str, int]]
    username: str | None
    password: str | None
    path: str
    query: str


def split(url: str, schemes: tuple[str, ...], default_port: int, kind: str) -> MultiHostUrl:
    """Raises ValueError when the scheme is not one of `schemes` (`kind`: for the message)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in schemes:
        raise ValueError(f"not a {kind} URL: {url!r}")
    rest, _, query = rest.partition("?")
    netloc, _, path = rest.partition("/")
    username = password = None
    if "@" in netloc:
        auth, _, netloc = netloc.rpartition("@")
        if ":" in auth:
            user, _, pw = auth.partition(":")
            username, password = (unquote(user) or None), unquote(pw)
        else:
            password = unquote(auth)
    hosts = []
    for part in netloc.split(","):
        if not part:
            continue
        if part.startswith("["):  # [ipv6]:port
            host, _, port = part[1:].partition("]:")
        else:
            host, _, port = part.rpartition(":") if ":" in part else (part, "", "")
        hosts.append((host, int(port or default_port)))
    return MultiHostUrl(scheme, hosts, username, password, path, query)
