"""Graceful shutdown: SIGTERM with a long-polling Fetch and a Produce in flight. Both
are answered (the fetch at once, with what it has; the produce once its append is
done), new connections are refused, the group's lease and the broker registration
are handed back, and the process exits 0 within --shutdown-timeout-ms."""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path

import redis
from conftest import start_skiff, stop_process
from faults_harness import PersistentRedis
from rawkafka import RawKafka, build_batch, fetch_request, fetched_records, produce_request
from test_redis_faults import ENV, create_topic

PRODUCE, FETCH, OFFSET_COMMIT = 0, 1, 8
NONE = 0
SHUTDOWN_TIMEOUT_MS = 6000


def test_sigterm_answers_in_flight_requests_and_deregisters(tmp_path: Path) -> None:
    store = PersistentRedis(tmp_path / "redis", extra=("--enable-debug-command", "local"))
    store.start()
    client = store.client()
    server = start_skiff(
        tmp_path / "skiff.log",
        "--redis-url",
        store.url,
        "--shutdown-timeout-ms",
        str(SHUTDOWN_TIMEOUT_MS),
        env=ENV,
    )
    try:
        topic = create_topic(server.bootstrap, 1)
        quiet = create_topic(server.bootstrap, 1)
        group = f"g-{topic}"
        with (
            RawKafka("127.0.0.1", server.port, timeout=30) as poller,
            RawKafka("127.0.0.1", server.port, timeout=30) as producer,
        ):
            # A standalone offset commit makes this sidecar the group's coordinator.
            commit = producer.request(
                OFFSET_COMMIT,
                8,
                {
                    "group_id": group,
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "group_instance_id": None,
                    "topics": [
                        {
                            "name": topic,
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "committed_offset": 0,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "",
                                }
                            ],
                        }
                    ],
                },
            )
            assert commit.topics[0].partitions[0].error_code == NONE
            lease = f"skiff:{{g/{group}}}:lease"
            assert client.exists(lease)
            assert len(client.hgetall("skiff:brokers")) == 1

            # A fetch that would wait 60 s for data that never comes.
            poller.send(FETCH, 12, fetch_request(quiet, {0: 0}, max_wait_ms=60_000))
            time.sleep(0.3)  # its first read is done: it waits for a wake-up now
            # A produce held up in Redis (DEBUG SLEEP) when SIGTERM arrives.
            sleeper = threading.Thread(
                target=lambda: redis.Redis(port=store.port, socket_timeout=30).execute_command(
                    "DEBUG", "SLEEP", 2
                ),
                daemon=True,
            )
            sleeper.start()
            time.sleep(0.2)
            producer.send(PRODUCE, 9, produce_request(topic, {0: build_batch([b"v"])}, 1, 20_000))
            time.sleep(0.3)
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            time.sleep(0.2)
            try:  # no new connections while it drains
                socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
                refused = False
            except OSError:
                refused = True
            assert refused

            fetched = poller.recv(FETCH, 12)
            part = fetched.responses[0].partitions[0]
            assert (part.error_code, part.high_watermark) == (NONE, 0)
            assert fetched_records(part.records) == []
            assert sleeper.is_alive()  # answered at once, not after the produce

            produced = producer.recv(PRODUCE, 9)
            p = produced.responses[0].partition_responses[0]
            assert (p.error_code, p.base_offset) == (NONE, 0)
            # Answered, then closed by the sidecar.
            assert poller.closed(SHUTDOWN_TIMEOUT_MS / 1000)
            assert producer.closed(SHUTDOWN_TIMEOUT_MS / 1000)

        assert server.proc.wait(timeout=SHUTDOWN_TIMEOUT_MS / 1000 + 2) == 0
        assert time.monotonic() - signalled < SHUTDOWN_TIMEOUT_MS / 1000 + 1
        assert client.hgetall("skiff:brokers") == {}
        assert not client.exists(lease)
        assert client.xlen(f"skiff:{{{topic}/0}}:log") == 1
        log = server.log()
        assert "Traceback" not in log, log
    finally:
        stop_process(server.proc)
        store.stop()


def test_shutdown_is_bounded_when_redis_is_gone(tmp_path: Path) -> None:
    """Redis is gone: deregistration cannot succeed, yet the process exits 0 within the
    bound."""
    store = PersistentRedis(tmp_path / "redis").start()
    server = start_skiff(
        tmp_path / "skiff.log", "--redis-url", store.url, "--shutdown-timeout-ms", "2000", env=ENV
    )
    try:
        store.stop()
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=10) == 0
        assert time.monotonic() - signalled < 4.0
    finally:
        stop_process(server.proc)
