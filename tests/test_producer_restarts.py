"""Idempotent producers (acks=all) through sidecar crashes: 100,000 records while the
sidecar is killed (SIGKILL) and restarted twice on the same port. Every acknowledged
record is in the log exactly once, and each partition holds the records in the order
they were produced. The confluent-kafka test runs on `record` and `batch` topics
(skiff.storage.format); the Java one, the same check with another client, on `record`
topics only (CI time)."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import redis
from clients import java_client
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import RedisServer, Skiff, free_port, start_skiff, stop_process
from formats import FORMATS

from sidecar.protocol import stored_batch

RECORDS = 100_000
PARTITIONS = 3
ENV = {"SKIFF_BROKER_SESSION_TIMEOUT_MS": "3000", "SKIFF_BROKER_HEARTBEAT_INTERVAL_MS": "500"}


def log_values(redis_server: RedisServer, topic: str, partition: int) -> list[bytes]:
    client = redis.Redis(port=redis_server.port)
    out: list[bytes] = []
    start = "-"
    while True:
        entries = client.xrange(f"skiff:{{{topic}/{partition}}}:log", start, "+", count=10_000)
        for entry_id, fields in entries:
            if stored_batch.FIELD in fields:  # a `batch` topic: its records in order
                batch = [[entry_id, [stored_batch.FIELD, fields[stored_batch.FIELD]]]]
                out += [f[5] for _, f in stored_batch.record_entries(batch)]
            else:
                out.append(fields[b"v"])
        if len(entries) < 10_000:
            return out
        start = "(" + entries[-1][0].decode()


def crash_twice_while(
    produce: Callable[[], dict[int, list[bytes]]],
    redis_server: RedisServer,
    tmp: Path,
    port: int,
    ready: Callable[[int], bool],
    killed: Sequence[threading.Event] = (),
) -> tuple[dict[int, list[bytes]], int]:
    """Run produce() in a thread; SIGKILL and restart the sidecar twice meanwhile, each
    time once ready(crash number) says the producer got far enough, then set
    killed[crash number - 1] (a producer that could finish first waits for it). Returns
    produce()'s acknowledged values per partition and the restarts done."""
    result: dict[str, dict[int, list[bytes]]] = {}
    thread = threading.Thread(target=lambda: result.update(acked=produce()), daemon=True)
    server = start_skiff(tmp / "s0.log", "--redis-url", redis_server.url, port=port, env=ENV)
    thread.start()
    restarts = 0
    try:
        for i in (1, 2):
            while thread.is_alive() and not ready(i):
                time.sleep(0.01)
            if not thread.is_alive():
                break
            stop_process(server.proc, signal.SIGKILL)
            if killed:
                killed[i - 1].set()
            time.sleep(0.5)
            server = start_skiff(
                tmp / f"s{i}.log", "--redis-url", redis_server.url, port=port, env=ENV
            )
            restarts += 1
        thread.join(300)
        assert not thread.is_alive(), "the producer did not finish"
    finally:
        stop_process(server.proc)
    return result["acked"], restarts


def check_log(redis_server: RedisServer, topic: str, acked: dict[int, list[bytes]]) -> None:
    total = 0
    for partition in range(PARTITIONS):
        stored = log_values(redis_server, topic, partition)
        assert len(stored) == len(set(stored)), f"duplicates in partition {partition}"
        # Acknowledged records: all there, in production order.
        positions = [stored.index(v) for v in acked.get(partition, [])]
        assert positions == sorted(positions)
        total += len(acked.get(partition, []))
    assert total == RECORDS


@pytest.fixture
def fmt() -> str:
    return "record"


@pytest.fixture
def topic(own_redis: RedisServer, tmp_path: Path, fmt: str) -> str:
    name = f"crash-{uuid.uuid4().hex[:8]}"
    server: Skiff = start_skiff(tmp_path / "setup.log", "--redis-url", own_redis.url, env=ENV)
    try:
        admin = AdminClient({"bootstrap.servers": server.bootstrap})
        new = NewTopic(name, PARTITIONS, 1, config={"skiff.storage.format": fmt})
        admin.create_topics([new])[name].result(30)
    finally:
        stop_process(server.proc)
    return name


@pytest.mark.parametrize("fmt", FORMATS)
def test_confluent_idempotent_producer_survives_sidecar_crashes(
    own_redis: RedisServer, tmp_path: Path, topic: str, fmt: str
) -> None:
    port = free_port()
    done = [0]  # acknowledged so far: the crashes come at 25% and 60%

    def produce() -> dict[int, list[bytes]]:
        acked: dict[int, list[bytes]] = {}
        failed: list[str] = []

        def report(err: object, msg: object) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                done[0] += 1
                acked.setdefault(msg.partition(), []).append(msg.value())  # type: ignore[attr-defined]

        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "reconnect.backoff.max.ms": 200,
            }
        )
        for i in range(RECORDS):
            if i in holds:
                # A fast machine could acknowledge everything before the kill: go no
                # further than 10% past its threshold until it happened (polling, so
                # acknowledgements keep arriving).
                while not holds[i].is_set() and time.monotonic() < give_up:
                    producer.poll(0.05)
            while True:
                try:
                    producer.produce(
                        topic, value=b"%d" % i, partition=i % PARTITIONS, on_delivery=report
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        assert producer.flush(180) == 0
        assert not failed, failed[:3]
        return acked

    thresholds = {1: RECORDS // 4, 2: RECORDS * 6 // 10}
    killed = [threading.Event(), threading.Event()]
    holds = {thresholds[i] + RECORDS // 10: killed[i - 1] for i in (1, 2)}
    give_up = time.monotonic() + 240
    acked, restarts = crash_twice_while(
        produce, own_redis, tmp_path, port, lambda i: done[0] >= thresholds[i], killed
    )
    assert restarts == 2
    check_log(own_redis, topic, acked)


def test_java_idempotent_producer_survives_sidecar_crashes(
    own_redis: RedisServer, tmp_path: Path, topic: str
) -> None:
    java_client.build_tool()  # before the clock starts
    port = free_port()

    def produce() -> dict[int, list[bytes]]:
        records = [{"partition": i % PARTITIONS, "value": b"%d" % i} for i in range(RECORDS)]
        meta = java_client.produce(
            f"127.0.0.1:{port}",
            topic,
            records,
            acks="all",
            idempotence=True,
            properties={"reconnect.backoff.max.ms": "200", "delivery.timeout.ms": "120000"},
            timeout_s=300,
        )
        acked: dict[int, list[bytes]] = {}
        for record, m in zip(records, meta, strict=True):
            assert m["offset"] >= 0
            acked.setdefault(m["partition"], []).append(record["value"])
        return acked

    started = time.monotonic()
    # No progress report from the JVM: crash 2.5 s and 4 s in (JVM start-up ~1 s).
    delays = {1: 2.5, 2: 4.0}
    acked, restarts = crash_twice_while(
        produce, own_redis, tmp_path, port, lambda i: time.monotonic() - started >= delays[i]
    )
    assert restarts >= 1  # the JVM may finish 100,000 records before the second crash
    check_log(own_redis, topic, acked)
