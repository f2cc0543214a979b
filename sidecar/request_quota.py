"""`request_percentage` quotas (KIP-124): the share of a request handler thread's time a
client may use, per sidecar, as Kafka's ClientRequestQuotaManager.

Kafka records the time a handler thread spent on each request, as a percentage of a
second (nanoseconds x 100 / 1e9), in the client's Rate, and throttles by at most one
quota window (quota.window.size.seconds: 1 s). A sidecar has one event loop instead of
handler threads: a request's time is the time its handler ran on the loop, summed over
the handler's steps between awaits (LoopTime), so time spent waiting for Redis or for
other requests is not counted, as a Kafka handler thread does not count the time a
request waits in a purgatory. The throttle time is written into the response's
throttle_time_ms (the larger of it and a byte-rate throttle already there) and the
connection is muted for it (KIP-219), as for byte-rate quotas.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Coroutine, Generator
from functools import cache
from typing import Any

from sidecar.protocol.primitives import pack_i32

PRODUCE_KEY = 0
NANOS_TO_PERCENT = 100 / 1e9


class LoopTime:
    """Await a coroutine, adding up the nanoseconds each of its steps ran (ns)."""

    __slots__ = ("_coro", "ns")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self.ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter_ns()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                self.ns += time.perf_counter_ns() - started
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # cancellation: passed on to the coroutine
                value, error = None, exc


@cache
def throttle_position(key: int, version: int) -> int | None:
    """Where throttle_time_ms is in the response body: 0 when it is the first field,
    -1 for Produce (its last field), None when this version has none first (or kio has
    no schema for it: then the connection is only muted)."""
    if key == PRODUCE_KEY:
        return -1 if version >= 1 else None
    try:
        from kio.index import load_response_schema

        fields = dataclasses.fields(load_response_schema(key, version))
    except Exception:
        return None
    return 0 if fields and fields[0].name == "throttle_time" else None


def with_throttle(
    body: bytes | list[Any], key: int, version: int, flexible: bool, throttle_ms: int
) -> bytes | list[Any]:
    """The response body with throttle_time_ms at least throttle_ms."""
    at = throttle_position(key, version)
    if at is None:
        return body
    if isinstance(body, list):  # a Fetch's parts (framing.response_frame)
        if at != 0 or not body or len(body[0]) < 4:
            return body
        return [_patched(bytes(body[0]), 0, throttle_ms), *body[1:]]
    if at == -1:
        at = len(body) - 4 - (1 if flexible else 0)  # Produce v9+ ends with its tags
    if at < 0 or len(body) < at + 4:
        return body
    return _patched(body, at, throttle_ms)


def _patched(body: bytes, at: int, throttle_ms: int) -> bytes:
    present = int.from_bytes(body[at : at + 4], "big", signed=True)
    if present >= throttle_ms:
        return body
    return body[:at] + pack_i32(throttle_ms) + body[at + 4 :]
