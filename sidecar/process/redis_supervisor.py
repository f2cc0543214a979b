"""Keeps the embedded redis-server running: reaps it when it dies, logs how it died in one
line, starts it again on the same data dir (its AOF brings the data back) after a pause
that doubles while restarts keep dying, and says why when it cannot be brought back
(/healthz answers 503 with that reason, so an orchestrator restarts the pod).

`tick()` never blocks: the sidecar calls it from its event loop (`run()`), the
`--workers` parent from its supervision loop. The storage layer reconnects by itself."""

from __future__ import annotations

import asyncio
import logging
import signal
import time

from sidecar.process.embedded_redis import EmbeddedRedis

log = logging.getLogger(__name__)

TICK_S = 0.2
BACKOFF_S = 0.5  # the first restart's pause; doubles per quick death, up to BACKOFF_MAX_S
BACKOFF_MAX_S = 10.0
STABLE_S = 30.0  # a server that ran this long was healthy: its death starts the count anew
MAX_QUICK_DEATHS = 5  # this many restarts in a row died quickly: unhealthy until one lasts
START_TIMEOUT_S = 20.0  # a restart that opens no socket in this long is killed


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        return f"was killed by signal {-returncode} ({name})"
    return f"exited with code {returncode}"


class RedisSupervisor:
    def __init__(self, redis: EmbeddedRedis) -> None:
        self.redis = redis
        self.started_at = time.monotonic()  # when the current server was started
        self.up = True  # the current server has opened its socket
        self.restart_due: float | None = None  # set while the server is down
        self.quick_deaths = 0
        self.last_death = ""

    def problem(self) -> str | None:
        """Why the embedded Redis cannot be brought back, or None while it runs or is
        being restarted within bounds."""
        if self.up or self.quick_deaths <= MAX_QUICK_DEATHS:
            return None
        return (
            f"the embedded redis-server cannot be restarted: {self.quick_deaths - 1} restarts "
            f"in a row died ({self.last_death}); see {self.redis.data_dir / 'redis.log'}"
        )

    def tick(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        proc = self.redis.process
        if self.restart_due is None and proc is not None:
            code = proc.poll()  # reaps it: no zombie
            if code is not None:
                self._died(now, describe_exit(code), proc.pid)
            elif not self.up and now - self.started_at > START_TIMEOUT_S:
                proc.kill()
                proc.wait()
                self._died(now, f"opened no socket in {START_TIMEOUT_S:.0f} s", proc.pid)
            elif not self.up and self.redis.socket_open():
                self.up = True
                log.warning("embedded redis-server restarted (pid %d)", proc.pid)
        if self.restart_due is not None and now >= self.restart_due:
            self.restart_due = None
            self.started_at = now
            self.up = False
            try:
                self.redis.spawn()
            except (OSError, RuntimeError) as exc:  # e.g. the binary is gone: a death too
                self.redis.process = None
                self._died(now, f"could not be started: {exc}")

    def _died(self, now: float, how: str, pid: int | None = None) -> None:
        quick = not self.up or now - self.started_at < STABLE_S
        self.quick_deaths = self.quick_deaths + 1 if quick else 1
        self.up = False
        self.last_death = how
        pause = min(BACKOFF_S * 2 ** (self.quick_deaths - 1), BACKOFF_MAX_S)
        self.restart_due = now + pause
        log.error(
            "embedded redis-server %s%s; restarting it in %.1f s (%s)",
            "" if pid is None else f"(pid {pid}) ",
            how,
            pause,
            self.problem() or f"attempt {self.quick_deaths}",
        )

    async def run(self) -> None:
        while True:
            self.tick()
            await asyncio.sleep(TICK_S)
