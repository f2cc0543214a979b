"""The embedded default: a private redis-server on a unix socket in --data-dir, with
AOF persistence (appendfsync always: an acknowledged record is on disk), started and
stopped with `skiff serve`."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child: get SIGTERM when Skiff dies, even by SIGKILL, so redis-server
    flushes its AOF and exits instead of outliving us."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class EmbeddedRedis:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.socket = self.data_dir / "redis.sock"
        self.pidfile = self.data_dir / "redis.pid"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self, timeout: float = 20.0) -> str:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server is not on PATH. Install Redis 7+ (Debian: apt-get install -y "
                "redis-server) or pass --redis-url redis://HOST:PORT to use a running Redis."
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._stop_leftover()
        if self.socket.exists():
            self.socket.unlink()
        options = {
            "port": "0",
            "unixsocket": str(self.socket),
            "unixsocketperm": "700",
            "dir": str(self.data_dir),
            "appendonly": "yes",
            # fsync before replying: 20% slower appends than everysec (measured,
            # docs/durability.md), but acks mean "on disk" with no replica to lean on.
            "appendfsync": "always",
            "save": "",
            "daemonize": "no",
            "pidfile": str(self.pidfile),
            "logfile": str(self.data_dir / "redis.log"),
        }
        args = [binary] + [part for k, v in options.items() for part in (f"--{k}", v)]
        self.process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent
        )
        deadline = time.monotonic() + timeout
        while not self.socket.exists():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with code {self.process.returncode}; "
                    f"see {self.data_dir / 'redis.log'}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not open {self.socket} in {timeout:.0f}s")
            time.sleep(0.02)
        log.info(
            "started embedded redis-server (pid %d) with AOF in %s", self.process.pid, self.data_dir
        )
        return self.url

    def _stop_leftover(self, timeout: float = 30.0) -> None:
        """Two redis-servers on one AOF directory would corrupt it: stop one left
        running on this data dir (e.g. by a Skiff that was killed) before starting."""
        try:
            pid = int(self.pidfile.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return
        if b"redis-server" not in cmdline:
            return
        log.warning("stopping redis-server pid %d left running on %s", pid, self.data_dir)
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if Path(f"/proc/{pid}").exists():
            raise RuntimeError(
                f"redis-server pid {pid} still runs on {self.data_dir}; stop it and start again"
            )

    def stop(self) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        # SIGTERM makes redis-server flush the AOF before it exits.
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.info("stopped embedded redis-server")
