"""--log-format json: every line the sidecar logs is one JSON object with ts, level,
logger and msg; connections get one line when they open and one when they close
(peer, client id, requests served, duration); errors get a line of their own.
Client-supplied strings cannot forge log lines (text: control characters escaped), and
no Redis password reaches the output, wherever the URL carries it."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, RedisServer, free_port, start_skiff, stop_process
from rawkafka import RawKafka, build_batch, produce_request

from sidecar.telemetry.redact import redact_url


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for_line(path: Path, match: Any, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = [doc for doc in json_lines(path) if match(doc)]
        if found:
            return found[0]
        assert time.monotonic() < deadline, path.read_text()
        time.sleep(0.05)


def test_json_connection_and_error_lines(
    own_redis: RedisServer, tmp_path: Path, topic: str
) -> None:
    log = tmp_path / "skiff.log"
    skiff = start_skiff(log, "--redis-url", own_redis.url, "--log-format", "json")
    try:
        with RawKafka("127.0.0.1", skiff.port, client_id="log-client") as kafka:
            peer = f"127.0.0.1:{kafka.local_port}"
            kafka.request(3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
            for _ in range(3):
                kafka.request(0, 9, produce_request(topic, {0: build_batch([b"x"] * 100)}))
        closed = wait_for_line(log, lambda d: d.get("event") == "close" and d["peer"] == peer)
        opened = wait_for_line(log, lambda d: d.get("event") == "open" and d["peer"] == peer)
        assert opened["level"] == "INFO"
        assert opened["logger"] == "sidecar.server"
        assert peer in opened["msg"]
        assert closed["client_id"] == "log-client"
        assert closed["requests"] == 4
        assert isinstance(closed["duration_s"], float) and closed["duration_s"] >= 0
        assert closed["reason"] == "closed by the client"
        assert "4 requests" in closed["msg"]

        with RawKafka("127.0.0.1", skiff.port, client_id="bad-client") as bad:
            bad_peer = f"127.0.0.1:{bad.local_port}"
            bad.send_raw(struct.pack(">i", -5))  # a negative frame size
            assert bad.closed()
        error = wait_for_line(log, lambda d: d.get("event") == "error" and d["peer"] == bad_peer)
        assert error["level"] == "WARNING"
        assert "request size -5" in error["msg"]
        closed = wait_for_line(log, lambda d: d.get("event") == "close" and d["peer"] == bad_peer)
        assert closed["client_id"] is None  # it never sent a request header
        assert "request size -5" in closed["reason"]
    finally:
        stop_process(skiff.proc)
    docs = json_lines(log)  # every line parses, the shutdown lines included
    assert all({"ts", "level", "logger", "msg"} <= doc.keys() for doc in docs)
    # No per-record logging: 300 records produced, a handful of lines in all.
    assert len(docs) < 40, [d["msg"] for d in docs]
    assert any(d["msg"] == "stopped" for d in docs)


def test_text_is_the_default(own_redis: RedisServer, tmp_path: Path) -> None:
    log = tmp_path / "skiff.log"
    skiff = start_skiff(log, "--redis-url", own_redis.url)
    stop_process(skiff.proc)
    first = log.read_text().splitlines()[0]
    assert not first.startswith("{")
    assert " INFO " in first


FORGED = "2030-01-01 00:00:00,000 ERROR skiff: FORGED admin password reset"


def _wait_for_text(log: Path, text: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while text not in (content := log.read_text(errors="replace")):
        assert time.monotonic() < deadline, content
        time.sleep(0.05)
    return content


def test_a_client_id_cannot_forge_text_log_lines(own_redis: RedisServer, tmp_path: Path) -> None:
    log = tmp_path / "skiff.log"
    skiff = start_skiff(log, "--redis-url", own_redis.url)
    try:
        for client_id in (f"evil\n{FORGED}", f"evil\r\n{FORGED}", f"evil\u2028{FORGED}"):
            with RawKafka("127.0.0.1", skiff.port, client_id=client_id) as kafka:
                kafka.request(3, 9, {"topics": [], "allow_auto_topic_creation": False})
        content = _wait_for_text(log, "\\u2028" + FORGED)  # the last close line, escaped
    finally:
        stop_process(skiff.proc)
    lines = content.splitlines()  # splitlines also breaks at \r and U+2028
    assert not [line for line in lines if line.startswith(FORGED)]
    assert any(f"client id evil\\n{FORGED}" in line for line in lines)
    assert any(f"client id evil\\r\\n{FORGED}" in line for line in lines)


def test_json_lines_stay_one_line_per_record(own_redis: RedisServer, tmp_path: Path) -> None:
    log = tmp_path / "skiff.log"
    skiff = start_skiff(log, "--redis-url", own_redis.url, "--log-format", "json")
    client_id = f"evil\u2028\x85\n{FORGED}"
    try:
        with RawKafka("127.0.0.1", skiff.port, client_id=client_id) as kafka:
            kafka.request(3, 9, {"topics": [], "allow_auto_topic_creation": False})
        closed = wait_for_line(log, lambda d: d.get("event") == "close" and d["client_id"])
    finally:
        stop_process(skiff.proc)
    assert closed["client_id"] == client_id  # json_lines parsed every splitlines() line


def test_redact_url_masks_every_password_form() -> None:
    cases = {
        "redis://:pw1@h:6379/0": "redis://:***@h:6379/0",
        "redis://user:pw1@h/0?password=pw2&db=1": "redis://user:***@h/0?password=***&db=1",
        "rediss://h/0?ssl_cert_reqs=none&password=pw2": "rediss://h/0?ssl_cert_reqs=none&password=***",
        "redis+sentinel://pw1@s1:26379,s2/mymaster/0?sentinel_password=pw2&sentinel_username=u": "redis+sentinel://***@s1:26379,s2/mymaster/0?sentinel_password=***&sentinel_username=u",
        "redis+cluster://u:pw1@n1:7000,n2:7001": "redis+cluster://u:***@n1:7000,n2:7001",
        "unix:///run/redis.sock?password=pw2&db=0": "unix:///run/redis.sock?password=***&db=0",
        "redis://h:6379/0": "redis://h:6379/0",
    }
    for url, redacted in cases.items():
        assert redact_url(url) == redacted, url


SECRET = "Sup3rSecretPassw0rd"


def _skiff_output(tmp_path: Path, url: str, *, must_start: bool) -> str:
    """Everything a sidecar started with `url` prints, start-up to shutdown."""
    log = tmp_path / f"skiff-{time.monotonic_ns()}.log"
    if must_start:
        skiff = start_skiff(log, "--redis-url", url)
        try:
            _wait_for_text(log, "listening on")  # the start-up line, naming the Redis
        finally:
            stop_process(skiff.proc)
        return skiff.log()
    proc = subprocess.run(
        [sys.executable, "-m", "sidecar.cli.main", "serve", "--listen", f"127.0.0.1:{free_port()}",
         "--redis-url", url, "--redis-connect-timeout", "1", "--redis-timeout-ms", "500"],
        cwd=ROOT, capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert proc.returncode != 0, proc.stderr
    return proc.stdout + proc.stderr


def test_no_redis_password_in_the_output(own_redis: RedisServer, tmp_path: Path) -> None:
    own_redis.client().config_set("requirepass", SECRET)
    port, dead = own_redis.port, free_port()
    started = [
        f"redis://:{SECRET}@127.0.0.1:{port}/0",
        f"redis://default:{SECRET}@127.0.0.1:{port}/0",
        f"redis://127.0.0.1:{port}/0?password={SECRET}",
        f"redis://127.0.0.1:{port}/0?socket_keepalive=true&password={SECRET}",
    ]
    refused = [
        f"redis://:{SECRET}x@127.0.0.1:{port}/0",  # a wrong password
        f"redis://127.0.0.1:{port}/0?password={SECRET}x",
        f"redis+sentinel://{SECRET}@127.0.0.1:{dead}/mymaster?sentinel_password={SECRET}",
        f"redis+sentinel://{SECRET}@127.0.0.1:x/mymaster",  # malformed
        f"redis+cluster://u:{SECRET}@127.0.0.1:{dead}",
        f"http://u:{SECRET}@127.0.0.1:{port}/?password={SECRET}",
    ]
    for url in started + refused:
        out = _skiff_output(tmp_path, url, must_start=url in started)
        assert SECRET not in out, (url, out)
        if url in started:
            assert redact_url(url) in out  # the log still says which Redis
        assert "Traceback" not in out, out


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_traceback_logged_by_skiff_stays_readable(fmt: str) -> None:
    """Escaping applies to the message only: Skiff's own tracebacks keep their lines."""
    code = (
        "import logging; from sidecar.telemetry import logs; "
        f"logs.configure('INFO', {fmt!r}); log = logging.getLogger('t')\n"
        "try:\n    raise ValueError('boom')\nexcept ValueError:\n"
        "    log.exception('failed for %s', 'a\\nb')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    if fmt == "text":
        first, *rest = proc.stderr.splitlines()
        assert first.endswith("failed for a\\nb")
        assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: boom"
    else:
        (doc,) = [json.loads(line) for line in proc.stderr.splitlines()]
        assert doc["msg"] == "failed for a\nb" and "ValueError: boom" in doc["exc"]
