"""The embedded default: a private redis-server on a unix socket in --data-dir, with
AOF persistence (appendfsync always: an acknowledged record is on disk), started and
stopped with `skiff serve`. The data dir is locked for as long as this process runs it
(data_dir_lock.py); redis_supervisor.py restarts the server when it dies."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from sidecar.process.data_dir_lock import DataDirLock

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
# redis-server's stream-node-max-bytes for Skiff (docs/operations-redis.md, "Stream node size")
STREAM_NODE_MAX_BYTES = "262144"
try:
    # Looked up here, not in the forked child: a restart forks from a process with
    # threads, where the child should not go through the dynamic loader.
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent() -> None:
    """In the child: get SIGTERM when Skiff dies, even by SIGKILL, so redis-server
    flushes its AOF and exits instead of outliving us."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM)


def _running(pid: int) -> bool:
    """Exists and is not a zombie (exited, waiting for a parent that may never reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


class EmbeddedRedis:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.resolve()
        self.socket = self.data_dir / "redis.sock"
        self.pidfile = self.data_dir / "redis.pid"
        self.process: subprocess.Popen[bytes] | None = None
        self.lock = DataDirLock(self.data_dir)

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self, timeout: float = 20.0) -> str:
        """Lock the data dir (DataDirInUse if a live Skiff has it), stop a redis-server
        a dead Skiff left in it, start ours and wait for its socket."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.lock.held:
            self.lock.acquire()
        try:
            self._stop_leftover()
            self.spawn()
            deadline = time.monotonic() + timeout
            while not self.socket_open():
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(
                        f"redis-server exited with code {self.process.returncode}; "
                        f"see {self.data_dir / 'redis.log'}"
                    )
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not open {self.socket} in {timeout:.0f}s")
                time.sleep(0.02)
        except BaseException:
            self.lock.release()
            raise
        assert self.process is not None
        log.info(
            "started embedded redis-server (pid %d) with AOF in %s", self.process.pid, self.data_dir
        )
        return self.url

    def spawn(self) -> None:
        """Start redis-server without waiting for it (the supervisor's restarts poll
        socket_open() instead of blocking)."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server is not on PATH. Install Redis 7+ (Debian: apt-get install -y "
                "redis-server) or pass --redis-url redis://HOST:PORT to use a running Redis."
            )
        # A killed server leaves its socket file behind: remove it, so that the socket
        # existing means the new server has opened it.
        self.socket.unlink(missing_ok=True)
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
            # A `batch` topic's entry is a whole batch, larger than the 4 KB default, so
            # each would be a stream node of its own, rounded up to an allocator size
            # class (~25% more memory for zstd batches); 256 KB nodes hold many
            # (docs/operations-redis.md, "Stream node size").
            "stream-node-max-bytes": STREAM_NODE_MAX_BYTES,
            "daemonize": "no",
            "pidfile": str(self.pidfile),
            "logfile": str(self.data_dir / "redis.log"),
        }
        args = [binary] + [part for k, v in options.items() for part in (f"--{k}", v)]
        self.process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent
        )

    def socket_open(self) -> bool:
        return self.socket.exists()

    def _stop_leftover(self, timeout: float = 30.0) -> None:
        """Two redis-servers on one AOF directory would corrupt it: stop one left
        running on this data dir by a Skiff that died. Called with the data dir's lock
        held, so its owner is dead: a live Skiff's server is never touched."""
        try:
            pid = int(self.pidfile.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return
        # The pid file may be old and its pid reused: only a redis-server on our socket.
        if b"redis-server" not in cmdline or str(self.socket).encode() not in cmdline:
            return
        log.warning("stopping redis-server pid %d left running on %s", pid, self.data_dir)
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _running(pid):
            raise RuntimeError(
                f"redis-server pid {pid} still runs on {self.data_dir}; stop it and start again"
            )

    def stop(self) -> None:
        """Stop the server and release the data dir."""
        try:
            self._stop_server()
        finally:
            self.lock.release()

    def _stop_server(self) -> None:
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
