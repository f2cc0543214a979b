"""Starting and stopping observability with the sidecar (called by sidecar/process/app.py)."""

from __future__ import annotations

import logging
from typing import Any

from sidecar.telemetry import metrics, tracing
from sidecar.telemetry.http import HttpEndpoint

log = logging.getLogger("skiff.telemetry")
TRACING_SHUTDOWN_S = 3.0  # at most this long flushing spans at shutdown
_registered: list[metrics.LiveCollector] = []  # at most one: the running sidecar's


class Telemetry:
    def __init__(self) -> None:
        self.live: metrics.LiveCollector | None = None
        self.http: HttpEndpoint | None = None

    @classmethod
    async def start(cls, settings: Any, broker: Any, server: Any) -> Telemetry:
        self = cls()
        try:
            traced = tracing.configure_from_env()
        except ValueError as exc:
            raise RuntimeError(f"cannot set up tracing: {exc}") from None
        if traced is None and tracing.TRACER is not None:
            traced = "installed in-process (tracing.install_for_tests)"
        log.info("tracing: %s", traced or "off (set OTEL_TRACES_EXPORTER to turn it on)")
        self.live = metrics.LiveCollector(
            lambda: len(server.connections), broker.wakeups.waiting, broker.store.identity
        )
        while _registered:  # left by a run in this process that failed before stop()
            metrics.REGISTRY.unregister(_registered.pop())
        metrics.REGISTRY.register(self.live)
        _registered.append(self.live)
        if settings.http_listen is not None:
            self.http = HttpEndpoint(broker, self.live)
            try:
                await self.http.start(settings.http_listen)
            except BaseException:
                await self.stop()
                raise
        return self

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
            self.http = None
        if self.live is not None and self.live in _registered:
            metrics.REGISTRY.unregister(self.live)
            _registered.remove(self.live)
        self.live = None
        await tracing.shutdown_within(TRACING_SHUTDOWN_S)

    def shutting_down(self) -> None:
        """/readyz answers 503 from now on: the sidecar is draining."""
        if self.http is not None:
            self.http.readiness.shutting_down = True
