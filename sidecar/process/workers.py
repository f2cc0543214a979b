"""`skiff serve --workers N`: N sidecar processes on one host, since one Python process
uses one core. The parent only supervises: it starts the embedded redis-server when no
--redis-url is given (one for all workers; locks the data dir, restarts the server when it
dies and tells the workers' /healthz when it cannot), starts the workers, restarts one that dies,
and on SIGTERM/SIGINT forwards SIGTERM to every worker and waits for their graceful
shutdown.

Each worker is a sidecar of its own (docs/architecture.md, "Several workers on one
host"): worker i listens on the --listen port + i, advertises the --advertise port + i,
serves HTTP on the --http-listen port + i and registers its own node id, so a client
that Metadata sends to node k reaches node k. One shared SO_REUSEPORT port would not do:
the kernel hands a connection to any worker, and a group's requests must reach the
worker holding its coordinator lease (others answer NOT_COORDINATOR, and the client
would retry on the same wrong connection)."""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from sidecar.config.settings import Endpoint, HostPort, Settings
from sidecar.process.data_dir_lock import DataDirInUse
from sidecar.process.embedded_redis import EmbeddedRedis, _die_with_parent
from sidecar.process.redis_supervisor import RedisSupervisor
from sidecar.telemetry import logs

log = logging.getLogger("skiff.workers")

# A worker that dies sooner than this after its start is restarted after a growing pause
# (up to RESTART_MAX_S), so a sidecar that cannot start does not spin.
QUICK_DEATH_S = 10.0
RESTART_MAX_S = 10.0


def _shift(hp: HostPort | None, index: int) -> HostPort | None:
    return None if hp is None else HostPort(hp.host, hp.port + index)


def _shift_all(endpoints: tuple[Endpoint, ...], index: int) -> tuple[Endpoint, ...]:
    return tuple(
        Endpoint(e.name, HostPort(e.address.host, e.address.port + index)) for e in endpoints
    )


def worker_settings(settings: Settings, index: int, redis_url: str, private: bool) -> Settings:
    """Worker `index`'s settings: its own ports and node id; UDP ingest only in worker 0
    (one socket per address)."""
    if settings.node_id >= 0:
        node_id = settings.node_id + index
    else:
        node_id = index if private else -1
    return dataclasses.replace(
        settings,
        listen=_shift(settings.listen, index),
        advertise=_shift(settings.advertise, index),
        listeners=_shift_all(settings.listeners, index),
        advertised_listeners=_shift_all(settings.advertised_listeners, index),
        http_listen=_shift(settings.http_listen, index),
        redis_url=redis_url,
        node_id=node_id,
        udp_listen=settings.udp_listen if index == 0 else None,
        udp_topic=settings.udp_topic if index == 0 else None,
    )


class _WorkerTag(logging.Filter):
    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def filter(self, record: logging.LogRecord) -> bool:
        record.worker = self.index
        return True


def _worker_main(
    index: int, settings: Settings, private: bool, log_level: str, log_format: str, problem: Any
) -> None:
    """A worker process (spawned): logs tagged with its index, then one sidecar."""
    _die_with_parent()  # the parent killed by SIGKILL: workers stop too
    logs.configure(log_level, log_format)
    handler = logging.getLogger().handlers[0]
    handler.addFilter(_WorkerTag(index))
    if log_format == "text":
        handler.setFormatter(
            logs.TextFormatter("%(asctime)s %(levelname)s [w%(worker)d] %(name)s: %(message)s")
        )
    from sidecar.process import event_loop
    from sidecar.process.app import serve

    try:
        event_loop.run(
            serve(settings, private_redis=private, redis_problem=_reader(problem)), settings
        )
    except RuntimeError as exc:
        logging.getLogger("skiff").error("%s", exc)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        pass


def _reader(shared: Any) -> Callable[[], str | None]:
    """The parent's word on the embedded Redis (Supervisor.redis_problem), for /healthz."""
    return lambda: shared.value.decode(errors="replace") or None


class Supervisor:
    def __init__(self, settings: Settings, count: int, log_level: str, log_format: str) -> None:
        self.settings = settings
        self.count = count
        self.log_args = (log_level, log_format)
        self.ctx = multiprocessing.get_context("spawn")
        self.procs: dict[int, Any] = {}
        self.started: dict[int, float] = {}
        self.pause: dict[int, float] = {}
        self.due: dict[int, float] = {}
        self.stopping = False
        # The embedded Redis's problem() for the workers' /healthz ("" while none).
        self.redis_problem = self.ctx.Array("c", 512)

    def _start(self, index: int, url: str, private: bool) -> None:
        settings = worker_settings(self.settings, index, url, private)
        proc = self.ctx.Process(
            target=_worker_main,
            args=(index, settings, private, *self.log_args, self.redis_problem),
            name=f"skiff-worker-{index}",
        )
        proc.start()
        self.procs[index] = proc
        self.started[index] = time.monotonic()
        log.info("worker %d started (pid %d) on %s", index, proc.pid, settings.listen)

    def _stop(self, signum: int, _frame: Any) -> None:
        if not self.stopping:
            log.info("signal %d: stopping %d workers", signum, len(self.procs))
        self.stopping = True
        for proc in self.procs.values():
            if proc.is_alive() and proc.pid is not None:
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def run(self) -> int:
        embedded = supervisor = None
        url = self.settings.redis_url
        if url is None:
            embedded = EmbeddedRedis(self.settings.data_dir)
            try:
                url = embedded.start()
            except DataDirInUse as exc:
                log.error("%s", exc)
                return 2
            except RuntimeError as exc:
                log.error("%s", exc)
                return 1
            supervisor = RedisSupervisor(embedded)
        private = embedded is not None
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        try:
            for index in range(self.count):
                self._start(index, url, private)
            while not self.stopping:
                self._supervise(url, private)
                if supervisor is not None:
                    supervisor.tick()
                    problem = (supervisor.problem() or "").encode()[: len(self.redis_problem) - 1]
                    if problem != self.redis_problem.value:
                        self.redis_problem.value = problem
                time.sleep(0.2)
            return self._wait_all()
        finally:
            if embedded is not None:
                embedded.stop()

    def _supervise(self, url: str, private: bool) -> None:
        now = time.monotonic()
        for index, proc in list(self.procs.items()):
            if proc.is_alive() or self.stopping:
                continue
            if index not in self.due:
                quick = now - self.started[index] < QUICK_DEATH_S
                pause = min(self.pause.get(index, 0.5) * 2, RESTART_MAX_S) if quick else 0.0
                self.pause[index] = pause or 0.5
                self.due[index] = now + pause
                log.warning(
                    "worker %d (pid %d) exited with code %s; restarting it in %.1f s",
                    index,
                    proc.pid,
                    proc.exitcode,
                    pause,
                )
            if now >= self.due[index]:
                del self.due[index]
                self._start(index, url, private)

    def _wait_all(self) -> int:
        bound = self.settings.shutdown_timeout_ms / 1000 + 5.0
        deadline = time.monotonic() + bound
        code = 0
        for index, proc in self.procs.items():
            proc.join(max(deadline - time.monotonic(), 0.1))
            if proc.is_alive():
                log.warning("worker %d did not stop within %.0f s; killing it", index, bound)
                proc.kill()
                proc.join()
            if proc.exitcode not in (0, -signal.SIGTERM, -signal.SIGINT):
                code = 1
        log.info("all workers stopped")
        return code


def run(settings: Settings, count: int, log_level: str, log_format: str) -> int:
    return Supervisor(settings, count, log_level, log_format).run()
