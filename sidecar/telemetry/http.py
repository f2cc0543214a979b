"""The HTTP endpoint (--http-listen): /healthz, /readyz and /metrics.

/healthz answers 200 while the process serves HTTP at all, 503 with a reason when
`liveness` (set by sidecar/process/app.py) reports something only a restart of the
process can fix: an embedded redis-server that cannot be brought back. /readyz answers 200 only
when Redis answers PING within READY_TIMEOUT_S, the Lua scripts are in its script
cache, the storage identity is intact (storage/identity.py) and this sidecar's
registration is current (Cluster.owns_leases); otherwise
503 with the reason as JSON. Its result is cached for READY_CACHE_S so a burst of
probes costs one check. Scripts missing after a Redis restart are loaded by the
check itself: a sidecar marked unready gets no traffic, so it would otherwise never
reload them (an EVALSHA's NOSCRIPT is what reloads them on the request path)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from sidecar.config.settings import HostPort
from sidecar.security.http_auth import HttpSecurity, verifiers_for
from sidecar.storage import scripts
from sidecar.telemetry import metrics

log = logging.getLogger("skiff.http")

READY_TIMEOUT_S = 0.5
READY_CACHE_S = 0.5
SCRAPE_TIMEOUT_S = 2.0


class Readiness:
    def __init__(self, broker: Any) -> None:
        self.broker = broker
        self._checked = float("-inf")
        self._result: tuple[bool, str] = (False, "not checked yet")
        self._lock = asyncio.Lock()
        self.shutting_down = False

    async def check(self) -> tuple[bool, str]:
        if self.shutting_down:
            return False, "shutting down"
        async with self._lock:
            now = time.monotonic()
            if now - self._checked >= READY_CACHE_S:
                self._result = await self._check()
                self._checked = time.monotonic()
            return self._result

    async def _check(self) -> tuple[bool, str]:
        redis = self.broker.store.redis
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                await redis.ping()
                loaded = await redis.script_exists(*(s.sha for s in scripts.ALL))
                missing = [s for s, ok in zip(scripts.ALL, loaded, strict=True) if not ok]
                for script in missing:
                    await script.load(redis)
        except TimeoutError:
            return False, f"Redis did not answer within {READY_TIMEOUT_S} s"
        except Exception as exc:
            return False, f"Redis unreachable: {exc}"
        if missing:
            log.info(
                "Lua scripts %s were not loaded (Redis restarted?); loaded them",
                ", ".join(s.name for s in missing),
            )
        lost = self.broker.store.identity.lost
        if lost is not None:
            return False, f"storage lost: {lost}. Decide with `skiff storage reset --fresh`"
        if not self.broker.cluster.owns_leases():
            return False, "this sidecar's broker registration is not current"
        return True, "ready"


class HttpEndpoint:
    def __init__(self, broker: Any, live: metrics.LiveCollector) -> None:
        self.broker = broker
        self.live = live
        self.readiness = Readiness(broker)
        self.runner: web.AppRunner | None = None
        self.port = 0
        self._scrape_lock = asyncio.Lock()
        self.liveness: Callable[[], str | None] = lambda: None  # a reason: not alive
        self.security: HttpSecurity | None = None

    async def start(self, listen: HostPort) -> None:
        app = web.Application(client_max_size=16 * 1024 * 1024)  # queue API batches
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics)
        # The queue API (/v1/queues/..., docs/queues.md) shares the listener.
        from sidecar.queues.http_api import add_routes

        add_routes(app, self.broker)
        if getattr(self.broker.settings, "console", True):
            from sidecar.console.app import add_routes as add_console

            add_console(app, self.broker)  # behind the same authentication, below
        # Credentials and TLS (--http-auth, --http-ssl-*): inside json_errors, so its
        # refusals and errors are the API's JSON too.
        security = self.security = HttpSecurity(self.broker.settings, verifiers_for(self.broker))
        app.middlewares.append(security.middleware)
        self.runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(
            self.runner, listen.host, listen.port, reuse_address=True, ssl_context=security.tls
        )
        try:
            await site.start()
        except OSError as exc:
            await self.runner.cleanup()
            raise RuntimeError(
                f"cannot serve HTTP on {listen}: {exc}. Pick another --http-listen, or "
                "'none' to turn the HTTP endpoint off."
            ) from exc
        security.start()
        server = site._server  # aiohttp keeps the asyncio.Server here
        sockets = getattr(server, "sockets", None) or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else listen.port
        log.info(
            "HTTP endpoint on %s (/healthz, /readyz, /metrics, /v1/queues%s): %s",
            HostPort(listen.host, self.port),
            ", /console" if getattr(self.broker.settings, "console", True) else "",
            security.describe(),
        )

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        if self.security is not None:
            await self.security.stop()

    async def healthz(self, request: web.Request) -> web.Response:
        problem = self.liveness()
        if problem is not None:
            return web.json_response({"status": "failing", "reason": problem}, status=503)
        return web.json_response({"status": "alive"})

    async def readyz(self, request: web.Request) -> web.Response:
        ready, reason = await self.readiness.check()
        return web.json_response({"ready": ready, "reason": reason}, status=200 if ready else 503)

    async def metrics(self, request: web.Request) -> web.Response:
        async with self._scrape_lock:  # one scrape renders at a time (shared snapshot)
            try:
                async with asyncio.timeout(SCRAPE_TIMEOUT_S):
                    snapshot = await metrics.redis_snapshot(self.broker.store.redis)
            except Exception as exc:
                snapshot = metrics.RedisSnapshot(ok=False, error=str(exc))
            self.live.snapshot = snapshot
            try:
                body = generate_latest(metrics.REGISTRY)
            finally:
                self.live.snapshot = None
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
