"""Durability: acks=-1 waits for Redis replicas (min.insync.replicas), and an append
whose reply is lost is resent by the sidecar without duplicating records."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
import redis
from conftest import RedisServer, free_port, start_redis, start_skiff, stop_process
from formats import FORMATS
from log_helpers import create
from rawkafka import RawKafka, build_batch, fetch_request, fetched_records, produce_request

from sidecar.storage.scripts import APPEND

# The proxy cuts an append, not a registry renewal: an EVALSHA of the append script, or
# (a `batch` topic's batch sent outside Lua) an EVAL of its source.
APPEND_MARKS = (APPEND.sha.encode(), APPEND.eval_source.encode()[:64])
PRODUCE, FETCH = 0, 1
NONE = 0
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20


def produce(kafka: RawKafka, topic: str, values: list[bytes], acks: int = -1) -> tuple[int, int]:
    resp = kafka.request(PRODUCE, 9, produce_request(topic, {0: build_batch(values)}, acks, 3000))
    [p] = resp.responses[0].partition_responses
    return int(p.error_code), int(p.base_offset)


def log_values(kafka: RawKafka, topic: str) -> list[bytes | None]:
    resp = kafka.request(FETCH, 12, fetch_request(topic, {0: 0}))
    return [r.value for r in fetched_records(resp.responses[0].partitions[0].records)]


def start_replica(tmp: Path, primary: RedisServer) -> RedisServer:
    replica = start_redis(tmp)
    client = replica.client()
    client.execute_command("REPLICAOF", "127.0.0.1", primary.port)
    deadline = time.monotonic() + 20
    while client.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "the replica did not sync"
        time.sleep(0.1)
    return replica


def test_acks_all_waits_for_a_redis_replica(own_redis: RedisServer, tmp_path: Path) -> None:
    replica = start_replica(tmp_path / "replica", own_redis)
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", own_redis.url, "--min-insync-replicas", "2"
    )
    topic = f"dur-{uuid.uuid4().hex[:8]}"
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            assert produce(kafka, topic, [b"a", b"b"]) == (NONE, 0)
            # Acknowledged means on the replica: read it there.
            assert replica.client().hget(f"skiff:{{{topic}/0}}:meta", "hw") == b"2"
            assert produce(kafka, topic, [b"c"], acks=1) == (NONE, 2)  # acks=1: no wait
            stop_process(replica.proc)
            deadline = time.monotonic() + 10
            while True:  # the primary notices the replica is gone
                error, _ = produce(kafka, topic, [b"x"])
                if error == NOT_ENOUGH_REPLICAS:
                    break
                # Appended but not replicated: never acknowledged as NONE.
                assert error == NOT_ENOUGH_REPLICAS_AFTER_APPEND, error
                assert time.monotonic() < deadline
                time.sleep(0.2)
            acknowledged = log_values(kafka, topic)
            assert acknowledged[:3] == [b"a", b"b", b"c"]
            assert set(acknowledged[3:]) <= {b"x"}  # only the unacknowledged attempts
    finally:
        stop_process(server.proc)
        stop_process(replica.proc)


class DroppingProxy:
    """TCP proxy between the sidecar and Redis that, once armed, lets the next append
    through to Redis and then cuts the connection before the reply reaches the
    sidecar: the append ran, the sidecar does not know."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.armed = threading.Event()
        self.dropped = 0
        self._server = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            cut = threading.Event()  # set: swallow Redis's next reply, close both sides
            for src, dst, to_redis in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(
                    target=self._pump, args=(src, dst, to_redis, cut), daemon=True
                ).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, to_redis: bool, cut: threading.Event
    ) -> None:
        try:
            while data := src.recv(65536):
                if not to_redis and cut.is_set():
                    self.dropped += 1  # Redis ran it; the reply never arrives
                    return
                marked = any(mark in data for mark in APPEND_MARKS)
                if to_redis and marked and self.armed.is_set():
                    self.armed.clear()
                    cut.set()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self._server.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_lost_append_reply_is_resent_without_duplicating(
    own_redis: RedisServer, tmp_path: Path, fmt: str
) -> None:
    proxy = DroppingProxy(own_redis.port)
    server = start_skiff(tmp_path / "skiff.log", "--redis-url", f"redis://127.0.0.1:{proxy.port}/0")
    topic = f"dur-{uuid.uuid4().hex[:8]}"
    try:
        with RawKafka("127.0.0.1", server.port) as kafka:
            create(kafka, topic, {"skiff.storage.format": fmt})
            assert produce(kafka, topic, [b"first"], acks=1) == (NONE, 0)
            proxy.armed.set()
            # Not an idempotent producer: only the append token prevents a second copy.
            assert produce(kafka, topic, [b"once", b"only"], acks=1) == (NONE, 1)
            assert proxy.dropped == 1
            assert produce(kafka, topic, [b"after"], acks=1) == (NONE, 3)
            assert log_values(kafka, topic) == [b"first", b"once", b"only", b"after"]
    finally:
        stop_process(server.proc)
        proxy.close()
    # And in Redis itself: four entries, contiguous (three batches on a `batch` topic).
    ids = [i for i, _ in redis.Redis(port=own_redis.port).xrange(f"skiff:{{{topic}/0}}:log")]
    assert ids == (
        [b"0-1", b"0-2", b"0-3", b"0-4"] if fmt == "record" else [b"0-1", b"0-3", b"0-4"]
    )
