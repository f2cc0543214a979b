"""Which client connection a request came on, for state Kafka ties to a connection
(share sessions: a broker forgets a client's share session, and releases its records,
when the connection closes).

`server.KafkaConnection` sets CONNECTION in its worker task, so every request task it
starts sees it, and calls `closed(id)` when the connection is lost; code that keeps
per-connection state registers a callback with `on_close`."""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# The id of the connection the current request arrived on (0: none, e.g. in tests).
CONNECTION: contextvars.ContextVar[int] = contextvars.ContextVar("skiff_connection", default=0)
_ON_CLOSE: list[Callable[[int], None]] = []
# The connection's mute deadline (time.monotonic()), a one-item list the connection
# shares with its request tasks: a request that violated a client quota extends it and
# the connection reads no further request until then (KIP-219; sidecar/quotas.py).
MUTED_UNTIL: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "skiff_muted_until", default=None
)


def mute(throttle_ms: int) -> None:
    """Read no further request from this request's connection for throttle_ms."""
    holder = MUTED_UNTIL.get()
    if holder is not None and throttle_ms > 0:
        holder[0] = max(holder[0], time.monotonic() + throttle_ms / 1000)


def on_close(callback: Callable[[int], None]) -> None:
    if callback not in _ON_CLOSE:
        _ON_CLOSE.append(callback)


def closed(connection_id: int) -> None:
    for callback in _ON_CLOSE:
        try:
            callback(connection_id)
        except Exception:
            log.exception("connection close callback failed")
