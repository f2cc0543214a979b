"""Secrets out of what Skiff prints or logs (docs/operations.md, "Secrets in logs").

A Redis URL can carry a password in three places, all of which redis-py (and Skiff's
Sentinel and Cluster URLs) accept: the userinfo (`redis://user:pw@host`, or a lone
`redis+sentinel://pw@host`), and query parameters (`?password=`, Sentinel's
`?sentinel_password=`). `redact_url` masks each; `redact_text` masks the same values
wherever they appear in a message (e.g. an error that quotes the URL)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

MASK = "***"
# Kafka marks configs of type PASSWORD as sensitive (ssl.key.password,
# sasl.jaas.config, ...); these words catch those and Redis URL parameters alike.
_SENSITIVE_WORDS = ("password", "secret", "token", "jaas", "credential")
# Kafka's other PASSWORD-type configs (PEM key and certificates given inline), and
# `skiff serve --add-scram` (`SCRAM-SHA-512=[name=admin,password=...]`), in dotted form.
_SENSITIVE_NAMES = (
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates",
    "add.scram",
)


def is_sensitive(name: str) -> bool:
    """Whether a config, flag or URL parameter named `name` holds a secret (a
    per-listener `listener.name.<l>.<config>` included)."""
    lowered = name.lower().replace("-", ".").replace("_", ".")
    return any(word in lowered for word in _SENSITIVE_WORDS) or lowered.endswith(_SENSITIVE_NAMES)


def _split_userinfo(url: str) -> tuple[str, str, str, str] | None:
    """(scheme://, userinfo, @host..., rest) of a URL with credentials, else None."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        userinfo, _, hosts = authority.rpartition("@")
        return scheme + sep, userinfo, "@" + hosts, slash + tail
    # A password with an unencoded '/', '?' or '#' (a malformed URL, which is reported
    # quoting it): the userinfo ends at the last '@' before the query, or at the last '@'.
    query = rest.find("?")
    at = rest.rfind("@", 0, query if query >= 0 else len(rest))
    if at < 0:
        at = rest.rfind("@")
    if at < 0:
        return None
    hosts, slash, tail = rest[at + 1 :].partition("/")
    return scheme + sep, rest[:at], "@" + hosts, slash + tail


def redact_url(url: str) -> str:
    """The URL with its password and password-like query parameters replaced by ***;
    the user name, hosts, path and other parameters stay (they say which Redis)."""
    split = _split_userinfo(url)
    if split is not None:
        head, userinfo, hosts, tail = split
        user, colon, _ = userinfo.partition(":")
        # A lone userinfo is a password for Skiff's Sentinel/Cluster URLs.
        url = head + (f"{user}:{MASK}" if colon else MASK) + hosts + tail
    base, question, query = url.partition("?")
    if not question:
        return url
    query, hash_, fragment = query.partition("#")
    params = []
    for param in query.split("&"):
        name, equals, _ = param.partition("=")
        params.append(f"{name}={MASK}" if equals and is_sensitive(unquote(name)) else param)
    return base + question + "&".join(params) + hash_ + fragment


def url_secrets(url: str) -> list[str]:
    """The secret values in a URL, as written and percent-decoded."""
    found: list[str] = []
    split = _split_userinfo(url)
    if split is not None:
        user, colon, password = split[1].partition(":")
        found.append(password if colon else user)
    query = urlsplit(url).query if "://" in url else ""
    for param in query.split("&"):
        name, equals, value = param.partition("=")
        if equals and is_sensitive(unquote(name)):
            found.append(value)
    return sorted({v for s in found if s for v in (s, unquote(s))}, key=len, reverse=True)


_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each secret replaced by ***, and any quoted part
    of a secret too (a parser's message may quote the piece it choked on)."""
    secrets = [s for s in secrets if s]
    for secret in secrets:
        text = text.replace(secret, MASK)

    def piece(match: re.Match[str]) -> str:
        quoted = match[1] or match[2]
        return MASK if any(quoted in secret for secret in secrets) else match[0]

    return _QUOTED.sub(piece, text)
