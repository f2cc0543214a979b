"""The HTTP endpoint: /healthz, /readyz (false while Redis is down, true again when
it returns on the same port with its data, storage lost without), --http-listen none,
and a clear start-up failure when the port is taken."""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pytest
from conftest import RedisServer, start_redis, start_skiff, stop_process
from telemetry_helpers import get, get_json, scrape, value


def wait_for_status(
    port: int, path: str, status: int, timeout: float = 30.0, reason: str = ""
) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        got, doc = get_json(port, path)
        if got == status and str(doc.get("reason", "")).startswith(reason):
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} stayed {got} {doc}, expected {status}")
        time.sleep(0.1)


def test_health_and_readiness_follow_redis(tmp_path: Path) -> None:
    redis_dir = tmp_path / "redis"
    redis = start_redis(redis_dir, aof=True)
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", redis.url)
    try:
        assert get_json(skiff.http_port, "/healthz") == (200, {"status": "alive"})
        assert get_json(skiff.http_port, "/readyz") == (200, {"ready": True, "reason": "ready"})
        assert get(skiff.http_port, "/nothing-here")[0] == 404

        stop_process(redis.proc)
        doc = wait_for_status(skiff.http_port, "/readyz", 503)
        assert doc["ready"] is False
        assert "Redis" in doc["reason"]
        assert get_json(skiff.http_port, "/healthz")[0] == 200  # alive, just not ready
        samples = scrape(skiff.http_port)  # /metrics still answers, without Redis figures
        assert value(samples, "skiff_scrape_redis_ok") == 0

        # The same port and data (its AOF): Redis forgets loaded scripts across a
        # restart, and the readiness check loads them again.
        redis = start_redis(redis_dir, port=redis.port, aof=True)
        assert wait_for_status(skiff.http_port, "/readyz", 200) == {
            "ready": True,
            "reason": "ready",
        }
        assert all(redis.client().script_exists(*_script_shas()))
        assert skiff.alive()

        # The same port without the data: the storage identity is gone, and readiness
        # says so until the operator decides (storage/identity.py).
        stop_process(redis.proc)
        shutil.rmtree(redis_dir)
        redis = start_redis(redis_dir, port=redis.port)
        doc = wait_for_status(skiff.http_port, "/readyz", 503, reason="storage lost: the")
        assert "skiff storage reset --fresh" in doc["reason"]
        assert get_json(skiff.http_port, "/healthz")[0] == 200
        assert skiff.alive()
    finally:
        stop_process(skiff.proc)
        stop_process(redis.proc)


def _script_shas() -> list[str]:
    from sidecar.storage import scripts

    return [s.sha for s in scripts.ALL]


def test_http_listen_none_serves_no_endpoint(own_redis: RedisServer, tmp_path: Path) -> None:
    skiff = start_skiff(
        tmp_path / "skiff.log", "--redis-url", own_redis.url, "--http-listen", "none"
    )
    try:
        # start_skiff passed --http-listen with a free port first; the later none wins.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", skiff.http_port), timeout=1).close()
        assert "HTTP endpoint on" not in skiff.log()
    finally:
        stop_process(skiff.proc)


def test_taken_http_port_fails_start_up_with_a_reason(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log = tmp_path / "skiff.log"
        with pytest.raises(RuntimeError):
            start_skiff(log, "--redis-url", own_redis.url, "--http-listen", f"127.0.0.1:{port}")
        text = log.read_text()
        # Found before start-up (cli/preflight.py): one line naming the flag and address.
        assert f"--http-listen 127.0.0.1:{port}: Address already in use" in text
        assert "Traceback" not in text
