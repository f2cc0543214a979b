"""Timing and tracing of Redis round trips (called by sidecar/storage/instrumented.py).

Every round trip is timed into skiff_redis_round_trip_seconds; while a sampled
request span is current, it also gets a CLIENT child span with OpenTelemetry's
database attributes (db.system=redis, db.operation.name, server.address/port).
Round trips outside a request (heartbeats, group sweeps) get no span."""

from __future__ import annotations

import time
from typing import Any

from sidecar.telemetry import metrics, requests, tracing

perf_counter = time.perf_counter


def wants_span() -> bool:
    """True while a sampled request span is current (worth building span attributes)."""
    scope = requests.CURRENT.get()
    return scope is not None and scope.span is not None


def begin(operation: str, server: dict[str, Any], extra: dict[str, Any] | None = None) -> Any:
    """Start a round trip; returns what end() needs. `server`: the client's
    server.address / server.port / db.namespace attributes."""
    scope = requests.CURRENT.get()
    span = None
    if scope is not None and scope.span is not None and tracing.TRACER is not None:
        from opentelemetry.trace import SpanKind

        attributes = {
            "db.system": "redis",
            "db.system.name": "redis",
            "db.operation.name": operation.split(" ", 1)[0],
            **server,
        }
        if extra:
            attributes.update(extra)
        span = tracing.TRACER.start_span(
            operation, context=scope.context, kind=SpanKind.CLIENT, attributes=attributes
        )
    return operation, perf_counter(), span


def end(started: Any, error: BaseException | None = None) -> None:
    operation, start, span = started
    metrics.redis_seconds[operation].observe(perf_counter() - start)
    if span is not None:
        if error is not None:
            from opentelemetry.trace import StatusCode

            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(StatusCode.ERROR, str(error)[:200])
        span.end()
