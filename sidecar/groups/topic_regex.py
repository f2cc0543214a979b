"""SubscribedTopicRegex (KIP-848) checked with RE2 semantics, as Kafka's RE2/J does:
no look-around or back-references, linear-time matching."""

from __future__ import annotations

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
