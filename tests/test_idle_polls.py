"""Idle long polls cost Redis nothing (issue 16): a Fetch whose every partition is at its
high watermark, as the sidecar knows it from wake-ups and earlier reads, waits without a
Redis round trip, and answers exactly what a read would have. Each test runs its own
redis-server and sidecar, so INFO commandstats counts only what they do."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from confluent_kafka import Consumer, TopicPartition
from conftest import RedisServer, Skiff, start_redis, start_skiff, stop_process
from log_helpers import (
    DELETE_TOPICS,
    NONE,
    OFFSET_OUT_OF_RANGE,
    create,
    delete_records,
    new_topic,
    produce,
    wait_for,
)
from rawkafka import RawKafka, Rec, build_batch, fetch_request

FETCH, METADATA = 1, 3
UNKNOWN_TOPIC_ID = 100
FETCH_PATH = ("exec", "xrange", "hmget")  # what store.read sends


@dataclass
class Stack:
    redis: RedisServer
    skiff: Skiff

    def calls(self) -> dict[str, int]:
        stats = self.redis.client().info("commandstats")
        return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}

    def fetch_path_calls(self) -> dict[str, int]:
        calls = self.calls()
        return {c: calls.get(c, 0) for c in FETCH_PATH}

    def waiting(self) -> int:
        url = f"http://127.0.0.1:{self.skiff.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("skiff_longpoll_waiters "):
                    return int(float(line.split()[1]))
        raise AssertionError("no skiff_longpoll_waiters in /metrics")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    server = start_redis(tmp_path / "redis")
    skiff = start_skiff(tmp_path / "skiff.log", "--redis-url", server.url)
    yield Stack(server, skiff)
    stop_process(skiff.proc)
    stop_process(server.proc)


def topic_id(kafka: RawKafka, topic: str) -> uuid.UUID:
    resp = kafka.request(METADATA, 12, {"topics": [{"name": topic}]})
    return resp.topics[0].topic_id


def fill(kafka: RawKafka, topic: str, n: int) -> None:
    batch = build_batch([Rec(value=f"v{i}".encode()) for i in range(n)])
    assert produce(kafka, topic, batch).error_code == NONE


def fetch_frame(
    kafka: RawKafka,
    topic: str,
    offset: int,
    max_wait_ms: int,
    version: int = 12,
    tid: uuid.UUID | None = None,
) -> tuple[bytes, Any]:
    """The response frame after its correlation id, and the partition decoded."""
    kafka.send(FETCH, version, fetch_request(topic, {0: offset}, tid, max_wait_ms=max_wait_ms))
    frame = kafka.recv_raw(timeout=max_wait_ms / 1000 + 10)
    resp = kafka.decode_response(FETCH, version, frame)
    return frame[4:], resp.responses[0].partitions[0]


@pytest.mark.parametrize(
    ("version", "storage"),
    [(4, "record"), (11, "record"), (12, "record"), (13, "record"), (15, "record"), (12, "batch")],
)
def test_a_long_poll_at_the_end_answers_what_a_read_would_without_one(
    stack: Stack, version: int, storage: str
) -> None:
    with RawKafka("127.0.0.1", stack.skiff.port) as kafka:
        topic = new_topic("idle")
        create(kafka, topic, {"skiff.storage.format": storage})
        fill(kafka, topic, 3)
        tid = topic_id(kafka, topic)
        read, p = fetch_frame(kafka, topic, 3, 0, version, tid)  # a read: fills the cache
        assert (p.error_code, p.high_watermark, getattr(p, "log_start_offset", 0)) == (NONE, 3, 0)
        before = stack.fetch_path_calls()
        start = time.monotonic()
        waited, _ = fetch_frame(kafka, topic, 3, 300, version, tid)
        assert time.monotonic() - start >= 0.3
        assert stack.fetch_path_calls() == before
        assert waited == read


def test_idle_consumers_long_polling_cost_no_fetch_reads(stack: Stack) -> None:
    """confluent-kafka consumers on an empty partition (fetch.wait.max.ms=500): once
    each has fetched, more polls read nothing from Redis."""
    consumers = 10
    with RawKafka("127.0.0.1", stack.skiff.port) as kafka:
        topic = new_topic("idle")
        create(kafka, topic)
    fetches = [0] * consumers  # Fetch requests each consumer sent (librdkafka stats)
    stop = threading.Event()

    def run(i: int) -> None:
        def stats(raw: str) -> None:
            import json

            brokers = json.loads(raw).get("brokers", {}).values()
            fetches[i] = sum(b.get("req", {}).get("Fetch", 0) for b in brokers)

        consumer = Consumer(
            {
                "bootstrap.servers": stack.skiff.bootstrap,
                "group.id": f"idle-{i}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 500,
                "statistics.interval.ms": 200,
                "stats_cb": stats,
            }
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        try:
            while not stop.is_set():
                assert consumer.poll(0.1) is None
        finally:
            consumer.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(consumers)]
    for t in threads:
        t.start()
    try:
        # Each has fetched (its first read fills the cache) before the window opens.
        wait_for(lambda: min(fetches) >= 2, 60, "every consumer to fetch twice")
        before, sent = stack.fetch_path_calls(), list(fetches)
        wait_for(
            lambda: all(f >= s + 4 for f, s in zip(fetches, sent, strict=True)),
            60,
            "every consumer to long-poll 4 more times",
        )
        after = stack.fetch_path_calls()
        polls = sum(fetches) - sum(sent)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert polls >= 4 * consumers
    assert after == before, f"{polls} idle polls read Redis: {before} -> {after}"


def test_a_record_produced_while_polls_idle_arrives_at_once(stack: Stack) -> None:
    with (
        RawKafka("127.0.0.1", stack.skiff.port) as waiter,
        RawKafka("127.0.0.1", stack.skiff.port) as producer,
    ):
        topic = new_topic("idle")
        create(producer, topic)
        fetch_frame(waiter, topic, 0, 0)
        waiter.send(FETCH, 12, fetch_request(topic, {0: 0}, max_wait_ms=20_000))
        wait_for(lambda: stack.waiting() == 1, 20, "the fetch to wait")
        start = time.monotonic()
        fill(producer, topic, 1)
        resp = waiter.recv(FETCH, 12, timeout=30)
        assert time.monotonic() - start < 10  # woken, not timed out (20 s)
        p = resp.responses[0].partitions[0]
        assert (p.error_code, p.high_watermark) == (NONE, 1)
        assert p.records


def test_delete_records_and_size_retention_move_the_log_start_polls_report(
    stack: Stack,
) -> None:
    with (
        RawKafka("127.0.0.1", stack.skiff.port) as kafka,
        RawKafka("127.0.0.1", stack.skiff.port) as waiter,
    ):
        topic = new_topic("idle")
        create(kafka, topic)
        fill(kafka, topic, 3)
        fetch_frame(kafka, topic, 3, 0)
        assert delete_records(kafka, topic, {0: 2}) == {0: (NONE, 2)}
        waited, p = fetch_frame(kafka, topic, 3, 200)
        assert (p.error_code, p.high_watermark, p.log_start_offset) == (NONE, 3, 2)
        assert waited == fetch_frame(kafka, topic, 3, 0)[0]
        # Moved while a poll waits: it answers the new log start.
        waiter.send(FETCH, 12, fetch_request(topic, {0: 3}, max_wait_ms=1500))
        wait_for(lambda: stack.waiting() == 1, 20, "the fetch to wait")
        assert delete_records(kafka, topic, {0: 3}) == {0: (NONE, 3)}
        p = waiter.recv(FETCH, 12, timeout=30).responses[0].partitions[0]
        assert (p.error_code, p.high_watermark, p.log_start_offset) == (NONE, 3, 3)

        # Size retention inside the append script: retention.bytes=0 keeps nothing.
        sized = new_topic("idle")
        create(kafka, sized, {"retention.bytes": "0"})
        fetch_frame(kafka, sized, 0, 0)
        fill(kafka, sized, 2)
        waited, p = fetch_frame(kafka, sized, 2, 200)
        assert (p.error_code, p.high_watermark, p.log_start_offset) == (NONE, 2, 2)
        assert waited == fetch_frame(kafka, sized, 2, 0)[0]


def test_a_deleted_and_recreated_topic_is_not_answered_from_memory(stack: Stack) -> None:
    with RawKafka("127.0.0.1", stack.skiff.port) as kafka:
        topic = new_topic("idle")
        create(kafka, topic)
        fill(kafka, topic, 2)
        old_id = topic_id(kafka, topic)
        fetch_frame(kafka, topic, 2, 0)  # remembered: hw 2
        [result] = kafka.request(
            DELETE_TOPICS, 6, {"topics": [{"name": topic}], "timeout": 5000}
        ).responses
        assert result.error_code == NONE
        create(kafka, topic)
        # The new topic's log is empty: offset 2 is out of range, as a read says.
        waited, p = fetch_frame(kafka, topic, 2, 300)
        assert (p.error_code, p.high_watermark, p.log_start_offset) == (OFFSET_OUT_OF_RANGE, -1, -1)
        waited, p = fetch_frame(kafka, topic, 0, 300)
        assert (p.error_code, p.high_watermark, p.log_start_offset) == (NONE, 0, 0)
        assert waited == fetch_frame(kafka, topic, 0, 0)[0]
        _, p = fetch_frame(kafka, topic, 2, 300, 13, old_id)
        assert p.error_code == UNKNOWN_TOPIC_ID


def test_a_lost_subscription_drops_what_the_sidecar_knew(stack: Stack) -> None:
    """A record appended while the wake-up subscription is down publishes to nobody:
    the next long poll must read it, not answer the old high watermark."""
    client = redis.Redis(port=stack.redis.port)
    with RawKafka("127.0.0.1", stack.skiff.port) as kafka:
        topic = new_topic("idle")
        create(kafka, topic)
        fill(kafka, topic, 1)
        fetch_frame(kafka, topic, 1, 0)  # remembered: hw 1
        assert client.client_kill_filter(_type="pubsub") == 1
        fill(kafka, topic, 1)  # hw 2, published while the sidecar resubscribes
        # Shorter than the resubscribe (0.5 s): answered by the read, not by a wake-up.
        _, p = fetch_frame(kafka, topic, 1, 200)
        assert (p.error_code, p.high_watermark) == (NONE, 2)
        assert p.records
        # Resubscribed: idle polls are answered from memory again, and still woken.
        wait_for(lambda: client.pubsub_numpat() == 1, 20, "the sidecar to resubscribe")
        fetch_frame(kafka, topic, 2, 0)

        def idle_poll_reads_nothing() -> bool:
            before = stack.fetch_path_calls()
            fetch_frame(kafka, topic, 2, 100)
            return stack.fetch_path_calls() == before

        wait_for(idle_poll_reads_nothing, 20, "idle polls to be answered from memory")
        kafka.send(FETCH, 12, fetch_request(topic, {0: 2}, max_wait_ms=20_000))
        wait_for(lambda: stack.waiting() == 1, 20, "the fetch to wait")
        with RawKafka("127.0.0.1", stack.skiff.port) as producer:
            fill(producer, topic, 1)
        p = kafka.recv(FETCH, 12, timeout=30).responses[0].partitions[0]
        assert (p.error_code, p.high_watermark) == (NONE, 3)
    client.close()


# -- the topic registry cache ------------------------------------------------------------------

CREATE_PARTITIONS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 37, 33, 44
MESSAGE_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION = 10, 3
TOPIC_RESOURCE = 2


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[RedisServer, Skiff, Skiff]]:
    """Two sidecars on one redis-server of their own."""
    server = start_redis(tmp_path / "redis")
    sidecars = [start_skiff(tmp_path / f"s{i}.log", "--redis-url", server.url) for i in (0, 1)]
    yield server, sidecars[0], sidecars[1]
    for s in sidecars:
        stop_process(s.proc)
    stop_process(server.proc)


class RegistryReads:
    """Reads of single registry entries (`HGET skiff:topics` / `skiff:topic_ids`) seen by
    a MONITOR connection; window() counts those between two ECHO markers, so none sent
    inside it is missed however late MONITOR delivers it. (INFO commandstats would count
    the broker registration script's HGETs too.)"""

    def __init__(self, server: RedisServer) -> None:
        self.client = server.client()
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        self.sock.sendall(b"MONITOR\r\n")
        self.reads = 0
        self.markers: dict[bytes, int] = {}  # marker -> reads counted when it came
        self.seen = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        pending = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            *lines, pending = (pending + chunk).split(b"\r\n")
            with self.seen:
                for line in lines:
                    if b'"HGET" "skiff:topics"' in line or b'"HGET" "skiff:topic_ids"' in line:
                        self.reads += 1
                    elif b'"ECHO" "registry-reads-' in line:
                        self.markers[line.rsplit(b'"', 2)[1]] = self.reads
                self.seen.notify_all()

    def mark(self) -> int:
        marker = f"registry-reads-{uuid.uuid4().hex}".encode()
        self.client.echo(marker)
        with self.seen:
            assert self.seen.wait_for(lambda: marker in self.markers, 30), "MONITOR is silent"
            return self.markers[marker]

    def close(self) -> None:
        self.sock.close()
        self.client.close()


def polls_read_no_registry(reads: RegistryReads, kafka: RawKafka, topic: str, hw: int) -> bool:
    """Long polls by topic id (Fetch v13) for longer than the 1 s expiry read no registry
    entry (with the expiry alone they would read one each second)."""
    tid = topic_id(kafka, topic)
    before = reads.mark()
    start = time.monotonic()
    while time.monotonic() - start < 2.0:
        _, p = fetch_frame(kafka, topic, hw, 250, 13, tid)
        assert (p.error_code, p.high_watermark) == (NONE, hw)
    return reads.mark() == before


def produce_error(kafka: RawKafka, topic: str, size: int, partition: int = 0) -> int:
    batch = build_batch([Rec(value=b"x" * size)])
    return int(produce(kafka, topic, batch, partition).error_code)


def set_topic_config(kafka: RawKafka, topic: str, name: str, value: str, legacy: bool) -> None:
    if legacy:  # AlterConfigs: the whole set of overrides
        body = {
            "resources": [
                {
                    "resource_type": TOPIC_RESOURCE,
                    "resource_name": topic,
                    "configs": [{"name": name, "value": value}],
                }
            ],
            "validate_only": False,
        }
        [result] = kafka.request(ALTER_CONFIGS, 2, body).responses
    else:
        body = {
            "resources": [
                {
                    "resource_type": TOPIC_RESOURCE,
                    "resource_name": topic,
                    "configs": [{"name": name, "config_operation": 0, "value": value}],
                }
            ],
            "validate_only": False,
        }
        [result] = kafka.request(INCREMENTAL_ALTER_CONFIGS, 1, body).responses
    assert result.error_code == NONE, result


def test_registry_changes_on_one_sidecar_reach_the_others_cache_at_once(
    pair: tuple[RedisServer, Skiff, Skiff],
) -> None:
    """The registry cache outlives the 1 s expiry while the wake-up subscription is live,
    so every writer publishes: each change made through one sidecar is answered by the
    other (which would otherwise keep its entry) as soon as the message arrives."""
    server, one, other = pair
    reads = RegistryReads(server)
    with (
        RawKafka("127.0.0.1", one.port) as admin,
        RawKafka("127.0.0.1", other.port) as kafka,
    ):
        topic = new_topic("registry")
        create(admin, topic)
        assert produce_error(kafka, topic, 2000) == NONE  # cached by the other sidecar
        wait_for(lambda: polls_read_no_registry(reads, kafka, topic, 1), 30, "a lasting cache")

        set_topic_config(admin, topic, "max.message.bytes", "500", legacy=False)
        wait_for(lambda: produce_error(kafka, topic, 2000) == MESSAGE_TOO_LARGE, 10, "the alter")
        set_topic_config(admin, topic, "max.message.bytes", "3000", legacy=True)
        wait_for(lambda: produce_error(kafka, topic, 2000) == NONE, 10, "the legacy alter")

        body = {
            "topics": [{"name": topic, "count": 2, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": False,
        }
        [result] = admin.request(CREATE_PARTITIONS, 3, body).results
        assert result.error_code == NONE
        wait_for(lambda: produce_error(kafka, topic, 10, 1) == NONE, 10, "the new partition")
        wait_for(lambda: polls_read_no_registry(reads, kafka, topic, 2), 30, "cached again")

        [deleted] = admin.request(
            DELETE_TOPICS, 6, {"topics": [{"name": topic}], "timeout": 5000}
        ).responses
        assert deleted.error_code == NONE
        # (Fetch, not Produce: a produce would create it again)
        wait_for(
            lambda: fetch_frame(kafka, topic, 0, 0)[1].error_code == UNKNOWN_TOPIC_OR_PARTITION,
            10,
            "the delete",
        )
        create(admin, topic)
        # Made again: the other sidecar appends at offset 0 of the new topic.
        batch = build_batch([Rec(value=b"again")])
        wait_for(lambda: produce(kafka, topic, batch).error_code == NONE, 10, "the re-create")
        assert fetch_frame(kafka, topic, 0, 0)[1].high_watermark == 1
    reads.close()


def test_a_lost_subscription_ends_the_lasting_registry_cache(stack: Stack) -> None:
    """A registry write while the subscription is down is published to nobody: once the
    loss is seen, entries last the 1 s expiry again and the next read finds the change."""
    client = redis.Redis(port=stack.redis.port)
    reads = RegistryReads(stack.redis)
    with RawKafka("127.0.0.1", stack.skiff.port) as kafka:
        topic = new_topic("registry")
        create(kafka, topic)
        assert produce_error(kafka, topic, 2000) == NONE
        wait_for(lambda: polls_read_no_registry(reads, kafka, topic, 1), 30, "a lasting cache")
        # A writer that publishes nothing (an entry changed behind the sidecars' backs):
        # with the subscription live the sidecar keeps what it has ...
        doc = json.loads(client.hget("skiff:topics", topic) or b"{}")
        doc["configs"] = {"max.message.bytes": "500"}
        client.hset("skiff:topics", topic, json.dumps(doc))
        assert produce_error(kafka, topic, 2000) == NONE
        # ... and reads it again once the subscription was lost.
        assert client.client_kill_filter(_type="pubsub") == 1
        wait_for(lambda: produce_error(kafka, topic, 2000) == MESSAGE_TOO_LARGE, 10, "a re-read")
    reads.close()
    client.close()
