"""OpenTelemetry traces, configured by the standard OTEL_* environment variables.

Tracing is off unless OTEL_TRACES_EXPORTER names an exporter (otlp, console): the
OpenTelemetry SDK is then not even imported, and the request path pays one
`TRACER is None` check. (The OpenTelemetry spec defaults OTEL_TRACES_EXPORTER to
otlp; Skiff does not, so that a sidecar without a collector does not try to export.)

The provider is Skiff's own, not the process-global one, so a test can install an
in-memory exporter (install_for_tests) without fighting over global state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import SpanContext, Tracer

log = logging.getLogger("skiff.tracing")

TRACER: Tracer | None = None  # None: tracing is off
_PROVIDER: TracerProvider | None = None
MAX_LINKS = 128  # the SDK's default span link limit


def exporters_from_env(environ: Mapping[str, str]) -> list[str]:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = environ.get("OTEL_TRACES_EXPORTER", "none").split(",")
    return [n.strip().lower() for n in names if n.strip() and n.strip().lower() != "none"]


def configure_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """Install a tracer provider as OTEL_* says; returns a description for the start-up
    log, or None when tracing stays off. Raises ValueError on an unknown exporter or
    protocol (a typo should not silently disable tracing)."""
    env = os.environ if environ is None else environ
    names = exporters_from_env(env)
    if not names:
        return None
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # The sampler comes from OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG (the SDK
    # reads them when no sampler is passed); the batch processor's limits from
    # OTEL_BSP_*; the exporters' endpoints, headers and timeouts from OTEL_EXPORTER_OTLP_*.
    provider = TracerProvider(resource=_resource(env))
    described = []
    for name in names:
        exporter, what = _exporter(name, env)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        described.append(what)
    install(provider)
    sampler = env.get("OTEL_TRACES_SAMPLER", "parentbased_always_on")
    arg = env.get("OTEL_TRACES_SAMPLER_ARG")
    return f"{', '.join(described)}; sampler {sampler}{f' ({arg})' if arg else ''}"


def _resource(env: Mapping[str, str]) -> Any:
    from opentelemetry.sdk.resources import Resource

    attributes: dict[str, str] = {}
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (from
    # os.environ); name the service "skiff" unless either names it.
    given = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    if not env.get("OTEL_SERVICE_NAME") and "service.name=" not in given:
        attributes["service.name"] = "skiff"
    return Resource.create(attributes)


def _exporter(name: str, env: Mapping[str, str]) -> tuple[SpanExporter, str]:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(), "console exporter"
    if name != "otlp":
        raise ValueError(f"OTEL_TRACES_EXPORTER {name!r} is not one of otlp, console, none")
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "(default endpoint)"
    )
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        return Grpc(), f"OTLP/gRPC exporter to {endpoint}"
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

        return Http(), f"OTLP/HTTP exporter to {endpoint}"
    raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL {protocol!r} is not grpc or http/protobuf")


def install(provider: TracerProvider) -> None:
    global TRACER, _PROVIDER
    _PROVIDER = provider
    TRACER = provider.get_tracer("skiff")


def install_for_tests(exporter: SpanExporter) -> TracerProvider:
    """Trace every request into `exporter` synchronously (e.g. InMemorySpanExporter),
    for tests that run the sidecar in-process."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    provider = TracerProvider(sampler=ALWAYS_ON)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(provider)
    return provider


def shutdown() -> None:
    """Flush what is buffered and stop tracing (blocks until the exporters are done)."""
    global TRACER, _PROVIDER
    provider, _PROVIDER, TRACER = _PROVIDER, None, None
    if provider is not None:
        try:
            provider.shutdown()
        except Exception as exc:  # an exporter that cannot reach its collector
            log.warning("flushing spans at shutdown failed: %s", exc)


async def shutdown_within(seconds: float) -> None:
    """shutdown() in a daemon thread, waiting at most `seconds`: an exporter retrying
    an unreachable collector must not hold up the sidecar's exit (spans still queued
    then are lost, as they would be on a crash)."""
    if _PROVIDER is None:
        return
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def run() -> None:
        try:
            shutdown()
        finally:
            try:
                loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    threading.Thread(target=run, name="skiff-tracing-shutdown", daemon=True).start()
    try:
        await asyncio.wait_for(asyncio.shield(done), seconds)
    except TimeoutError:
        log.warning("spans not exported within %.0f s of shutdown were dropped", seconds)


_HEX = frozenset("0123456789abcdef")


def parse_traceparent(raw: bytes | str | None) -> SpanContext | None:
    """A W3C traceparent header (version-traceid-spanid-flags) as a remote SpanContext,
    or None when it is malformed (https://www.w3.org/TR/trace-context/#traceparent-header)."""
    from opentelemetry.trace import SpanContext, TraceFlags

    if raw is None:
        return None
    try:
        text = raw.decode("ascii") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        return None
    text = text.strip()
    parts = text.split("-")
    if len(parts) < 4:
        return None
    version, trace_id, span_id, flags = parts[:4]
    if len(version) != 2 or not _HEX.issuperset(version) or version == "ff":
        return None
    # Version 00 has exactly four fields; a later version may append more.
    if version == "00" and len(parts) != 4:
        return None
    if len(trace_id) != 32 or len(span_id) != 16 or len(flags) != 2:
        return None
    if not (_HEX.issuperset(trace_id) and _HEX.issuperset(span_id) and _HEX.issuperset(flags)):
        return None
    tid, sid = int(trace_id, 16), int(span_id, 16)
    if tid == 0 or sid == 0:
        return None
    return SpanContext(tid, sid, is_remote=True, trace_flags=TraceFlags(int(flags, 16) & 0x01))
