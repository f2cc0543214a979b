"""Which client connection a request came on, for state Kafka ties to a connection
(share sessions: a broker forgets a client's share session, and releases its records,
when the connection closes).

`server.KafkaConnection` sets CONNECTION in its worker task, so every request task it
starts sees it, and calls `closed(id)` when the connection is lost; code that keeps
per-connection state registers a callback with `on_close`."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

# The id of the connection the current request arrived on (0: none, e.g. in tests).
CONNECTION: contextvars.ContextVar[int] = contextvars.ContextVar("skiff_connection", default=0)
_ON_CLOSE: list[Callable[[int], None]] = []


def on_close(callback: Callable[[int], None]) -> None:
    if callback not in _ON_CLOSE:
        _ON_CLOSE.append(callback)


def closed(connection_id: int) -> None:
    for callback in _ON_CLOSE:
        try:
            callback(connection_id)
        except Exception:
            log.exception("connection close callback failed")
