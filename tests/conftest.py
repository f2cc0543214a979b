"""Fixtures: a real redis-server on a free port and Skiff as a real process, both
killed by pid afterwards. No fakes."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import known_secrets
import pytest
import redis

from sidecar.process.embedded_redis import STREAM_NODE_MAX_BYTES

ROOT = Path(__file__).resolve().parents[1]
# Sidecars that tests start by other means than start_skiff must not all claim the
# default HTTP port 127.0.0.1:8080 (they would collide): no HTTP endpoint for them.
os.environ.setdefault("SKIFF_HTTP_LISTEN", "none")

# Tests produce records with fixed timestamps years old; with Kafka's default retention.ms
# (7 days) a sidecar's time-retention sweep would remove them in the middle of a test. Sidecars
# started by tests sweep only when a test asks (--log-retention-check-interval-ms).
os.environ.setdefault("SKIFF_LOG_RETENTION_CHECK_INTERVAL_MS", str(10**12))

# The session sidecar auto-creates a fresh topic for most tests, faster than the default
# --auto-create-topics-per-minute allows; tests of that limit set it themselves.
os.environ.setdefault("SKIFF_AUTO_CREATE_TOPICS_PER_MINUTE", "-1")


# Test Redis servers run with the stream node size Skiff ships (embedded redis-server,
# k8s redis.conf): retention, DeleteRecords and compaction are tested on the nodes
# they meet in production.
REDIS_NODE_ARGS = ("--stream-node-max-bytes", STREAM_NODE_MAX_BYTES)


# Ports handed out lately, not handed out again: the kernel's bind to port 0 may return a
# port it returned a moment ago while whoever got it has not bound it yet, e.g. a
# sidecar's Kafka and HTTP ports. Its HTTP listener then answered on the Kafka port
# ("HTTP" read as a frame size). Bounded: the oldest go first.
_HANDED_OUT: dict[int, None] = {}
_HANDED_OUT_MAX = 4096


def hand_out_ports(ports: range) -> bool:
    if any(p in _HANDED_OUT for p in ports):
        return False
    for p in ports:
        _HANDED_OUT[p] = None
    while len(_HANDED_OUT) > _HANDED_OUT_MAX:
        del _HANDED_OUT[next(iter(_HANDED_OUT))]
    return True


def _kernel_free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port() -> int:
    return free_port_block(1)


def free_port_block(count: int) -> int:
    """A port P with P .. P + count - 1 free just now and not handed out by this process
    lately (`serve --workers N` listens on P + i, and refuses to start when one is taken)."""
    while True:
        base = _kernel_free_port()
        try:
            for offset in range(1, count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + offset))
        except OSError:
            continue
        if hand_out_ports(range(base, base + count)):
            return base


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout}s")


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, sig)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


@dataclass
class RedisServer:
    port: int
    proc: subprocess.Popen[bytes]
    dir: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port)


def start_redis(tmp: Path, port: int | None = None, aof: bool = False) -> RedisServer:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: run ./test.sh, or apt-get install redis-server")
    if port is not None:
        return _start_redis(binary, tmp, port, aof)
    # A port free just now may be taken before redis-server binds it (parallel test
    # workers, clients' ephemeral ports): redis-server then exits, and a new port is tried.
    for attempt in range(3):
        try:
            return _start_redis(binary, tmp, free_port(), aof)
        except RuntimeError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _start_redis(binary: str, tmp: Path, port: int, aof: bool) -> RedisServer:
    tmp.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if aof else "no",
            "--dir",
            str(tmp),
            "--daemonize",
            "no",
            *REDIS_NODE_ARGS,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)
    except RuntimeError:
        stop_process(proc)
        raise
    return RedisServer(port, proc, tmp)


@dataclass
class Skiff:
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path
    args: list[str] = field(default_factory=list)
    http_port: int = 0  # the HTTP endpoint (/healthz, /readyz, /metrics)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None


def start_skiff(
    log_path: Path, *args: str, port: int | None = None, env: dict[str, str] | None = None
) -> Skiff:
    # A port found free can be taken before the sidecar binds it (an outgoing
    # connection's ephemeral port, another xdist worker's server): then new ports,
    # unless the caller chose them.
    chosen = port is not None or "--listen" in args or "--http-listen" in args
    for attempt in range(3):
        try:
            return _start_skiff_once(log_path, args, port, env)
        except RuntimeError as exc:
            if chosen or attempt == 2 or "Address already in use" not in str(exc):
                raise
    raise AssertionError("unreachable")


def _start_skiff_once(
    log_path: Path, args: tuple[str, ...], port: int | None, env: dict[str, str] | None
) -> Skiff:
    workers = int(args[args.index("--workers") + 1]) if "--workers" in args else 1
    port = port or free_port_block(workers)
    # each sidecar its own (args may still say --http-listen)
    http_port = free_port_block(workers)
    log_file = open(log_path, "ab")  # noqa: SIM115 - handed to the child process
    known_secrets.output_file(log_path)
    cmd = [
        sys.executable,
        "-m",
        "sidecar.cli.main",
        "serve",
        "--listen",
        f"127.0.0.1:{port}",
        "--http-listen",
        f"127.0.0.1:{http_port}",
        *args,
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    log_file.close()
    try:
        wait_for_port(port, proc)
    except RuntimeError:
        stop_process(proc)
        raise RuntimeError(f"skiff did not start:\n{log_path.read_text()}") from None
    return Skiff(port, proc, log_path, list(args), http_port)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if os.environ.get("SKIFF_TEST_REDIS") == "cluster":
        # The session Redis is a 3+3 Redis Cluster (tests/redis_cluster_harness.py), its
        # client() a RedisCluster: runs tests written for one Redis against a cluster.
        from redis_cluster_harness import start_redis_cluster

        cluster = start_redis_cluster(tmp_path_factory.mktemp("redis-cluster"))
        yield cluster.as_session_server()  # type: ignore[misc]
        cluster.stop()
        return
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    stop_process(server.proc)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis for one test. Sidecars sharing a Redis are one cluster: Metadata lists them
    all and clients follow it, so a sidecar started with settings of its own (or killed)
    needs a Redis of its own, or other tests' clients would reach it."""
    server = start_redis(tmp_path / "own-redis")
    yield server
    stop_process(server.proc)


@pytest.fixture(scope="session")
def skiff(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Skiff]:
    log_path = tmp_path_factory.mktemp("skiff") / "skiff.log"
    server = start_skiff(log_path, "--redis-url", redis_server.url)
    yield server
    stop_process(server.proc)


@pytest.fixture(scope="session")
def kafka4_admin() -> Iterator[object]:
    """One real Kafka 4.x broker (kafka_tools.admin_kafka: super user User:ANONYMOUS, a
    SCRAM listener) for every test comparing Kafka's admin tools on it and on Skiff: a
    broker start costs seconds. Skipped without java or mvn."""
    from kafka_tools import ToolsUnavailable, admin_kafka

    try:
        with admin_kafka() as kafka:
            yield kafka
    except ToolsUnavailable as exc:
        pytest.skip(f"no reference Kafka: {exc}")


@pytest.fixture
def topic() -> str:
    """A fresh topic name per test: tests share one Redis and one Skiff."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """No registered test secret in any sidecar log, scraped /metrics or exported span of
    the whole session (tests/known_secrets.py): one line per finding, the session fails."""
    findings = known_secrets.session_findings()
    if not findings:
        return
    lines = [f"secret leaked: {finding}" for finding in findings]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        print("\n".join(lines), file=sys.stderr)
    else:
        reporter.write_sep("=", "test secrets in Skiff's output (tests/known_secrets.py)", red=True)
        for line in lines:
            reporter.write_line(line, red=True, bold=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
