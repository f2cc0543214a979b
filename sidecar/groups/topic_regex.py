"""SubscribedTopicRegex (KIP-848) checked with RE2 semantics, as Kafka's RE2/J does:
no look-around or back-references, linear-time matching."""

from __future__ import annotations

import functools

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error goes to the client, not to our stderr


def regex_error(pattern: str) -> str | None:
    """None if `pattern` compiles, else RE2's description of what is wrong."""
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else ""
        return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
    return None


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re2._Regexp:
    return re2.compile(pattern, _OPTIONS)


def regex_matches(pattern: str, topic: str) -> bool:
    """Whether the whole of `topic` matches (Kafka: RE2/J's Matcher.matches())."""
    return _compiled(pattern).fullmatch(topic) is not None
