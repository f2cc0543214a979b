"""Resource bounds of the Kafka listener (sidecar/server.py), with Kafka's names:
max.connections, max.connections.per.ip(.overrides), queued.max.request.bytes,
connections.max.idle.ms, plus Skiff's partial-frame deadline; and the count of
connections throttled by an ip's connection_creation_rate quota (quotas.py).

Each breach is logged at most once a second per limit (a flood of breaches must not
become a flood of log lines) and counted in /metrics.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sidecar.telemetry import metrics
from sidecar.telemetry.logs import RateLimitedLog

log = logging.getLogger("sidecar.server")


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """The limits as configured (sidecar/config/settings.py)."""

    max_connections: int
    max_connections_per_ip: int
    per_ip_overrides: dict[str, int]
    queued_max_request_bytes: int  # -1: unbounded, as Kafka
    connections_max_idle_ms: int  # -1: never
    partial_frame_timeout_ms: int  # -1: never


class ConnectionCounts:
    """Open connections, in total and per client IP, checked when one is accepted."""

    def __init__(self, limits: ListenerLimits) -> None:
        self.limits = limits
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self._log = RateLimitedLog(log)

    def admit(self, host: str, peer: str) -> bool:
        """Count a new connection from `host`, or return False (the caller closes it)."""
        limits = self.limits
        if self.total >= limits.max_connections:
            self._refuse(peer, "max.connections", limits.max_connections)
            return False
        allowed = limits.per_ip_overrides.get(host, limits.max_connections_per_ip)
        if self.per_ip.get(host, 0) >= allowed:
            self._refuse(peer, "max.connections.per.ip", allowed)
            return False
        self.total += 1
        self.per_ip[host] = self.per_ip.get(host, 0) + 1
        return True

    def release(self, host: str) -> None:
        self.total -= 1
        left = self.per_ip[host] - 1
        if left:
            self.per_ip[host] = left
        else:
            del self.per_ip[host]

    def throttled(self, peer: str, throttle_ms: int) -> None:
        """A connection over its ip's connection_creation_rate, closed in throttle_ms."""
        metrics.connections_rejected["connection_creation_rate"].inc()
        self._log.warning(
            "throttled connection from %s: connection_creation_rate exceeded, closing it in %d ms",
            peer,
            throttle_ms,
        )

    def _refuse(self, peer: str, limit: str, value: int) -> None:
        metrics.connections_rejected[limit].inc()
        self._log.warning("refused connection from %s: %s=%d reached", peer, limit, value)


class RequestMemory:
    """queued.max.request.bytes: the bytes of requests read or being read and not yet
    answered, over all connections.

    A frame reserves its declared size when its 4-byte size prefix arrives, and gives it
    back when its request is answered (or its connection closes). It is admitted when it
    fits under the limit, or when nothing else is reserved (so a frame above the limit
    still gets in, alone); otherwise its connection stops reading (pause_reading) until
    a release makes room. Reserved bytes thus stay below max(limit, the largest frame);
    the buffer itself only grows with the bytes actually received. While a frame above
    the limit waits, no other frame is admitted, so small requests cannot starve it.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit if limit >= 0 else None
        self.used = 0
        # Connections waiting for room: (size, resume) in arrival order.
        self.waiting: deque[tuple[int, Callable[[], None]]] = deque()
        self.oversized_waiting = 0
        self._log = RateLimitedLog(log)

    def try_reserve(self, size: int) -> bool:
        if self._fits(size) and not self.oversized_waiting:
            self.used += size
            return True
        return False

    def wait(self, size: int, resume: Callable[[], None], peer: str) -> None:
        """Called after try_reserve failed: `resume` runs once the bytes are reserved."""
        self.waiting.append((size, resume))
        if self._oversized(size):
            self.oversized_waiting += 1
        metrics.REQUEST_READS_PAUSED.inc()
        self._log.warning(
            "pausing reads from %s: queued.max.request.bytes=%d reached (%d bytes queued, "
            "its request has %d)",
            peer,
            self.limit,
            self.used,
            size,
        )

    def cancel(self, resume: Callable[[], None]) -> None:
        """A waiting connection closed."""
        for item in self.waiting:
            if item[1] is resume:
                self.waiting.remove(item)
                if self._oversized(item[0]):
                    self.oversized_waiting -= 1
                return

    def release(self, size: int) -> None:
        self.used -= size
        if not self.waiting:
            return
        # Waiters in arrival order: each that fits now is admitted; behind an oversized
        # one that does not, nobody passes. Callbacks run after the state is settled
        # (they may reserve again).
        admitted: list[Callable[[], None]] = []
        kept: deque[tuple[int, Callable[[], None]]] = deque()
        while self.waiting:
            item = self.waiting.popleft()
            if self._fits(item[0]):
                self.used += item[0]
                admitted.append(item[1])
            else:
                kept.append(item)
                if self._oversized(item[0]):
                    kept.extend(self.waiting)
                    self.waiting.clear()
        self.waiting = kept
        self.oversized_waiting = sum(1 for s, _ in kept if self._oversized(s))
        for resume in admitted:
            resume()

    def _oversized(self, size: int) -> bool:
        return self.limit is not None and size > self.limit

    def _fits(self, size: int) -> bool:
        return self.limit is None or self.used == 0 or self.used + size <= self.limit
