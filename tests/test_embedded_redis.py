"""The embedded redis-server (no --redis-url) is supervised and its data dir is locked:
a SIGKILLed server is reaped, logged and restarted on its AOF while a producer runs
(nothing acknowledged is lost, /readyz comes back); /healthz answers 503 when it cannot
be restarted; a second `skiff serve` on a live data dir is refused with exit status 2
without touching the first; a redis-server left by a dead Skiff is replaced. All with
real processes: redis-server, Skiff over TCP, confluent-kafka."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest
import redis
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import ROOT, Skiff, free_port_block, start_skiff, stop_process, wait_for_port
from telemetry_helpers import get

DEADLINE_S = 60.0  # generous: the machine may be loaded


def wait_until(what: str, check, timeout: float = DEADLINE_S, log: Skiff | None = None):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what} within {timeout:.0f} s" + (f"\n{log.log()}" if log else "")
            )
        time.sleep(0.1)


def http_status(port: int, path: str) -> tuple[int, dict]:
    try:
        status, body, _ = get(port, path, timeout=2.0)
    except OSError:
        return 0, {}
    return status, json.loads(body)


def redis_pids_in_log(skiff: Skiff) -> list[int]:
    """The embedded redis-server pids Skiff reported, in order (start, then restarts)."""
    return [
        int(pid)
        for pid in re.findall(
            r"(?:started embedded redis-server|embedded redis-server restarted) \(pid (\d+)\)",
            skiff.log(),
        )
    ]


def zombie_children(pid: int) -> list[int]:
    """Children of `pid` in state Z (exited, never reaped), read from /proc."""
    zombies = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            status = Path(f"/proc/{child.pid}/status").read_text()
        except FileNotFoundError:
            continue
        if re.search(r"^State:\s+Z", status, re.M):
            zombies.append(child.pid)
    return zombies


def reaped(pid: int) -> bool:
    """A dead child is gone from /proc only once its parent has waited for it."""
    return not Path(f"/proc/{pid}").exists()


class RunningProducer:
    """An idempotent producer writing 0, 1, 2, ... in a thread; `acked` holds what the
    sidecar acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: list[int] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
        )
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _delivered(self, err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            self.acked.append(int(msg.value()))
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, value=b"%d" % i, on_delivery=self._delivered)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.005)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert self.producer.flush(120) == 0


def read_all(bootstrap: str, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}"})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[int] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < high and time.monotonic() < deadline:
            got += [int(m.value()) for m in consumer.consume(1000, 0.5) if not m.error()]
        assert len(got) == high, (len(got), high)
        return got
    finally:
        consumer.close()


def test_a_killed_embedded_redis_is_restarted_and_nothing_acknowledged_is_lost(
    tmp_path: Path,
) -> None:
    skiff = start_skiff(tmp_path / "skiff.log", "--data-dir", str(tmp_path / "data"))
    producer = None
    second = 0
    try:
        [first] = wait_until("embedded redis-server started", lambda: redis_pids_in_log(skiff))
        topic = f"t-{uuid.uuid4().hex[:12]}"
        producer = RunningProducer(skiff.bootstrap, topic)
        wait_until("200 records acknowledged", lambda: len(producer.acked) >= 200, log=skiff)

        psutil.Process(first).kill()
        wait_until(
            "the death logged",
            lambda: (
                f"embedded redis-server (pid {first}) was killed by signal 9 (SIGKILL)"
                in skiff.log()
            ),
            log=skiff,
        )
        wait_until("the dead redis-server reaped", lambda: reaped(first), log=skiff)
        [_, second] = wait_until(
            "a restarted redis-server",
            lambda: redis_pids_in_log(skiff)[1:] and redis_pids_in_log(skiff),
            log=skiff,
        )
        assert second != first and psutil.pid_exists(second)
        wait_until("/readyz 200 again", lambda: http_status(skiff.http_port, "/readyz")[0] == 200)
        after = len(producer.acked)
        wait_until("200 more acknowledged", lambda: len(producer.acked) >= after + 200, log=skiff)
        producer.finish()
        assert http_status(skiff.http_port, "/healthz") == (200, {"status": "alive"})
        assert zombie_children(skiff.proc.pid) == []

        got = read_all(skiff.bootstrap, topic)
        assert set(producer.acked) <= set(got), sorted(set(producer.acked) - set(got))[:10]
        assert len(got) == len(set(got)), "a record was written twice"
        assert skiff.alive()
    finally:
        if producer is not None:
            producer.stop.set()
        stop_process(skiff.proc)
    assert skiff.proc.returncode == 0, skiff.log()
    assert not psutil.pid_exists(second)


def corrupt_manifest(data_dir: Path) -> tuple[Path, bytes]:
    """Make the AOF unloadable (as a bad disk would): redis-server then exits at start."""
    [manifest] = (data_dir / "appendonlydir").glob("*.manifest")
    original = manifest.read_bytes()
    manifest.write_bytes(b"this is not a manifest\n")
    return manifest, original


def test_healthz_fails_while_the_embedded_redis_cannot_be_restarted(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    skiff = start_skiff(tmp_path / "skiff.log", "--data-dir", str(data_dir))
    try:
        [first] = wait_until("embedded redis-server started", lambda: redis_pids_in_log(skiff))
        producer = Producer({"bootstrap.servers": skiff.bootstrap})
        producer.produce("kept", value=b"before")
        assert producer.flush(30) == 0
        manifest, original = corrupt_manifest(data_dir)
        psutil.Process(first).kill()

        status, doc = wait_until(
            "/healthz 503",
            lambda: (got := http_status(skiff.http_port, "/healthz"))[0] == 503 and got,
            log=skiff,
        )
        assert doc["status"] == "failing"
        assert "embedded redis-server cannot be restarted" in doc["reason"], doc
        assert str(data_dir.resolve() / "redis.log") in doc["reason"], doc
        assert http_status(skiff.http_port, "/readyz")[0] == 503
        assert skiff.alive()
        assert zombie_children(skiff.proc.pid) == []

        # Repaired: the next restart (at most 10 s away) brings it back with its data.
        manifest.write_bytes(original)
        wait_until("/healthz 200", lambda: http_status(skiff.http_port, "/healthz")[0] == 200)
        wait_until("/readyz 200", lambda: http_status(skiff.http_port, "/readyz")[0] == 200)
        consumer = Consumer({"bootstrap.servers": skiff.bootstrap, "group.id": "g"})
        consumer.assign([TopicPartition("kept", 0, 0)])
        msg = wait_until("the record read back", lambda: consumer.poll(0.5), log=skiff)
        assert msg.error() is None and msg.value() == b"before"
        consumer.close()
    finally:
        stop_process(skiff.proc)


def test_workers_parent_restarts_the_embedded_redis_and_fails_healthz(tmp_path: Path) -> None:
    """--workers 2: the parent supervises the one embedded server for both workers."""
    data_dir = tmp_path / "data"
    port, http_port = free_port_block(2), free_port_block(2)
    parent = start_skiff(
        tmp_path / "workers.log",
        "--data-dir",
        str(data_dir),
        "--workers",
        "2",
        "--http-listen",
        f"127.0.0.1:{http_port}",
        port=port,
    )
    try:
        wait_for_port(port + 1, parent.proc)
        [first] = wait_until("embedded redis-server started", lambda: redis_pids_in_log(parent))
        for i in (0, 1):
            wait_until("ready", lambda i=i: http_status(http_port + i, "/readyz")[0] == 200)
        psutil.Process(first).kill()
        wait_until("the dead redis-server reaped", lambda: reaped(first), log=parent)
        wait_until("restarted", lambda: len(redis_pids_in_log(parent)) == 2, log=parent)
        for i in (0, 1):
            wait_until("ready again", lambda i=i: http_status(http_port + i, "/readyz")[0] == 200)

        second = redis_pids_in_log(parent)[1]
        manifest, original = corrupt_manifest(data_dir)
        psutil.Process(second).kill()
        for i in (0, 1):
            status, doc = wait_until(
                f"worker {i} /healthz 503",
                lambda i=i: (got := http_status(http_port + i, "/healthz"))[0] == 503 and got,
                log=parent,
            )
            assert "embedded redis-server cannot be restarted" in doc["reason"], doc
        assert zombie_children(parent.proc.pid) == []
        manifest.write_bytes(original)
        for i in (0, 1):
            wait_until("alive again", lambda i=i: http_status(http_port + i, "/healthz")[0] == 200)
    finally:
        stop_process(parent.proc)
    assert parent.proc.returncode == 0, parent.log()


@pytest.mark.parametrize("extra", [[], ["--workers", "2"]], ids=["serve", "workers"])
def test_a_second_serve_on_a_live_data_dir_is_refused(tmp_path: Path, extra: list[str]) -> None:
    data_dir = tmp_path / "data"
    first = start_skiff(tmp_path / "first.log", "--data-dir", str(data_dir))
    try:
        [redis_pid] = wait_until("embedded redis-server started", lambda: redis_pids_in_log(first))
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "sidecar.cli.main",
                "serve",
                "--listen",
                f"127.0.0.1:{free_port_block(2)}",
                "--http-listen",
                "none",
                "--data-dir",
                str(data_dir),
                *extra,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
        )
        assert second.returncode == 2, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in second.stderr, second.stderr
        assert f"is in use by Skiff pid {first.proc.pid}" in lines[0], lines
        assert str(data_dir.resolve()) in lines[0], lines

        # The first keeps its redis-server and serves.
        assert psutil.pid_exists(redis_pid) and redis_pids_in_log(first) == [redis_pid]
        assert "left running" not in first.log()
        producer = Producer({"bootstrap.servers": first.bootstrap})
        producer.produce("still-here", value=b"x")
        assert producer.flush(30) == 0
        assert http_status(first.http_port, "/readyz")[0] == 200
    finally:
        stop_process(first.proc)
    assert first.proc.returncode == 0, first.log()


def test_a_stale_redis_server_of_a_dead_skiff_is_replaced(tmp_path: Path) -> None:
    """A redis-server still running in the data dir after its Skiff died (the lock file
    names a dead pid, nobody holds the lock) is stopped and replaced; its data stays."""
    data_dir = (tmp_path / "data").resolve()
    data_dir.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (data_dir / "skiff.lock").write_text(f"{dead.pid}\n")
    socket_path = data_dir / "redis.sock"
    binary = shutil.which("redis-server")
    assert binary is not None
    # Started as the dead Skiff's was, then orphaned (its parent, the shell, exits).
    command = [
        binary,
        *("--port", "0", "--unixsocket", str(socket_path), "--dir", str(data_dir)),
        *("--appendonly", "yes", "--save", "", "--pidfile", str(data_dir / "redis.pid")),
        *("--logfile", str(data_dir / "redis.log")),
    ]
    shell = subprocess.run(
        ["sh", "-c", '"$@" </dev/null >/dev/null 2>&1 & echo $!', "sh", *command],
        capture_output=True,
        text=True,
        check=True,
        timeout=DEADLINE_S,
    )
    stale = int(shell.stdout)
    skiff = None
    try:
        client = redis.Redis(unix_socket_path=str(socket_path))
        wait_until("the stale server answers", lambda: _pings(client))
        client.set("left-by-the-dead-skiff", b"kept")
        client.close()
        skiff = start_skiff(tmp_path / "skiff.log", "--data-dir", str(data_dir))
        assert f"stopping redis-server pid {stale} left running on {data_dir}" in skiff.log()
        wait_until("the stale server gone", lambda: not _alive(stale))
        [ours] = redis_pids_in_log(skiff)
        assert ours != stale
        assert (data_dir / "skiff.lock").read_text().strip() == str(skiff.proc.pid)
        client = redis.Redis(unix_socket_path=str(socket_path))
        assert client.get("left-by-the-dead-skiff") == b"kept"  # it flushed its AOF
        client.close()
        assert wait_until("ready", lambda: http_status(skiff.http_port, "/readyz")[0] == 200)
    finally:
        if skiff is not None:
            stop_process(skiff.proc)
        if _alive(stale):
            psutil.Process(stale).kill()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.exceptions.ConnectionError:
        return False
