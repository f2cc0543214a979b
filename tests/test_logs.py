"""--log-format json: every line the sidecar logs is one JSON object with ts, level,
logger and msg; connections get one line when they open and one when they close
(peer, client id, requests served, duration); errors get a line of their own."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

from conftest import RedisServer, start_skiff, stop_process
from rawkafka import RawKafka, build_batch, produce_request


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
