"""The Kafka listener's resource bounds (sidecar/server_limits.py): max.connections,
max.connections.per.ip(.overrides), queued.max.request.bytes, connections.max.idle.ms,
the partial-frame deadline and --auto-create-topics-per-minute. Each test runs a real
sidecar with its own limits on a Redis of its own and talks to it over TCP."""

from __future__ import annotations

import re
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from clients import confluent_client
from conftest import RedisServer, Skiff, start_skiff, stop_process
from log_helpers import wait_for
from rawkafka import ConnectionClosed, RawKafka, build_batch, metadata_request, produce_request
from telemetry_helpers import scrape, value

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18
NONE, UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE = 0, 3, 10
MiB = 1024 * 1024


@pytest.fixture
def run_skiff(own_redis: RedisServer, tmp_path: Path) -> Iterator[Callable[..., Skiff]]:
    started: list[Skiff] = []

    def start(*flags: str) -> Skiff:
        server = start_skiff(tmp_path / "skiff.log", "--redis-url", own_redis.url, *flags)
        started.append(server)
        return server

    yield start
    for server in started:
        stop_process(server.proc)


def api_versions_ok(kafka: RawKafka) -> bool:
    body = {"client_software_name": "limits-test", "client_software_version": "1"}
    return bool(kafka.request(API_VERSIONS, 3, body).error_code == NONE)


def metric(skiff: Skiff, name: str, **labels: str) -> float:
    return value(scrape(skiff.http_port), name, **labels)


def test_connection_limits_close_the_extra_connection(run_skiff: Callable[..., Skiff]) -> None:
    skiff = run_skiff(
        "--max-connections", "3",
        "--max-connections-per-ip", "2",
        "--max-connections-per-ip-overrides", "127.0.0.4:0",
    )  # fmt: skip
    # start_skiff's probe of the port is a connection too: wait until it is gone.
    wait_for(lambda: metric(skiff, "skiff_open_connections") == 0, what="no connection open")
    first = RawKafka("127.0.0.1", skiff.port)
    second = RawKafka("127.0.0.1", skiff.port)
    assert api_versions_ok(first) and api_versions_ok(second)
    # A third connection from the same IP: closed at once, before any request.
    third = RawKafka("127.0.0.1", skiff.port)
    assert third.closed(timeout=10)
    # The override: no connection at all from 127.0.0.4.
    overridden = RawKafka("127.0.0.1", skiff.port, source_host="127.0.0.4")
    assert overridden.closed(timeout=10)
    # Another IP still gets in, up to max.connections in total.
    other = RawKafka("127.0.0.1", skiff.port, source_host="127.0.0.2")
    assert api_versions_ok(other)
    over_total = RawKafka("127.0.0.1", skiff.port, source_host="127.0.0.3")
    assert over_total.closed(timeout=10)
    # Those accepted keep working.
    assert api_versions_ok(first) and api_versions_ok(other)
    samples = scrape(skiff.http_port)
    assert value(samples, "skiff_connections_rejected_total", limit="max.connections.per.ip") == 2
    assert value(samples, "skiff_connections_rejected_total", limit="max.connections") == 1
    assert value(samples, "skiff_open_connections") == 3
    log = skiff.log()
    assert re.search(r"refused connection from 127\.0\.0\.1:\d+: max\.connections\.per\.ip=2", log)
    # A closed connection frees its slot (the sidecar notices the close asynchronously).
    first.close()

    def reconnects() -> bool:
        kafka = RawKafka("127.0.0.1", skiff.port)
        try:
            return api_versions_ok(kafka)
        except (ConnectionClosed, OSError):
            return False
        finally:
            kafka.close()

    wait_for(reconnects, what="a connection slot freed by a close")
    for kafka in (second, third, overridden, other, over_total):
        kafka.close()


def test_idle_connection_closed(run_skiff: Callable[..., Skiff]) -> None:
    skiff = run_skiff("--connections-max-idle-ms", "2000")
    idle = RawKafka("127.0.0.1", skiff.port)
    busy = RawKafka("127.0.0.1", skiff.port)
    assert api_versions_ok(idle)
    quiet_since = time.monotonic()
    # A connection used every 200 ms outlives the idle one.
    while not idle.closed(timeout=0.2):
        assert api_versions_ok(busy)
        assert time.monotonic() - quiet_since < 30, "the idle connection was never closed"
    assert time.monotonic() - quiet_since >= 2.0
    assert api_versions_ok(busy)
    assert metric(skiff, "skiff_connections_expired_total", limit="connections.max.idle.ms") == 1
    idle.close()
    busy.close()


def test_partial_frame_past_its_deadline_is_closed(run_skiff: Callable[..., Skiff]) -> None:
    skiff = run_skiff("--partial-frame-timeout-ms", "1500")
    slow = RawKafka("127.0.0.1", skiff.port)
    # A 50 MiB frame started, then trickled a byte every 100 ms: never idle, never done.
    slow.send_raw(struct.pack(">i", 50 * MiB) + b"\x00" * 1000)
    started = time.monotonic()
    closed = False
    while not closed:
        assert time.monotonic() - started < 30, "the partial frame was never timed out"
        try:
            slow.send_raw(b"\x00")
        except OSError:  # reset by the sidecar
            break
        closed = slow.closed(timeout=0.1)
    assert time.monotonic() - started >= 1.5
    with RawKafka("127.0.0.1", skiff.port) as other:
        assert api_versions_ok(other)
    samples = scrape(skiff.http_port)
    assert value(samples, "skiff_connections_expired_total", limit="partial.frame.timeout.ms") == 1
    assert value(samples, "skiff_queued_request_bytes") == 0  # its reservation was freed
    assert "(partial.frame.timeout.ms)" in skiff.log()
    slow.close()


def _produce_v3_prefix(kafka: RawKafka, topic: str, records_size: int) -> bytes:
    """A Produce v3 frame's bytes up to its records (the last field of a v3 body), with the
    frame's size prefix for records of `records_size` bytes."""
    small = kafka.frame(PRODUCE, 3, produce_request(topic, {0: b"x"}, acks=1), 1)[4:]
    head = small[: -(4 + 1)]
    return struct.pack(">i", len(head) + 4 + records_size) + head + struct.pack(">i", records_size)


def _vm_kib(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", status, re.M)
    assert match, status
    return int(match.group(1))


def test_big_frames_keep_memory_bounded(run_skiff: Callable[..., Skiff]) -> None:
    """5 connections each send one 100 MiB Produce frame: the sidecar reads at most
    queued.max.request.bytes (128 MiB) of them at a time (the rest wait in the kernel's socket
    buffers), answers every one, and a normal client is served meanwhile."""
    queued = 128 * MiB
    skiff = run_skiff(
        "--max-request-bytes", str(110 * MiB),
        "--queued-max-request-bytes", str(queued),
    )  # fmt: skip
    topic = "big-frames"
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        [entry] = kafka.request(METADATA, 9, metadata_request([topic])).topics
        assert entry.error_code == NONE
    baseline_kib = _vm_kib(skiff.proc.pid, "VmRSS")
    size = 100 * MiB
    records = bytearray(size)  # a v2 batch header claiming 100 MiB: MESSAGE_TOO_LARGE
    struct.pack_into(">qi", records, 0, 0, size - 12)
    records[16] = 2
    big = bytes(records)
    del records
    answers: dict[int, object] = {}

    def send_big(i: int) -> None:
        try:
            with RawKafka("127.0.0.1", skiff.port, timeout=240) as kafka:
                kafka.send_raw(_produce_v3_prefix(kafka, topic, size))
                kafka.send_raw(big)
                response = kafka.recv(PRODUCE, 3)
                answers[i] = response.responses[0].partition_responses[0].error_code
        except Exception as exc:  # reported by the main thread
            answers[i] = exc

    # 5 frames are 4 times the budget. Without it, 10 frames grew the sidecar by 1.8 GB,
    # so 5 would by about 900 MiB: far over the bound checked below.
    threads = [threading.Thread(target=send_big, args=(i,)) for i in range(5)]
    for thread in threads:
        thread.start()
    # Meanwhile a normal client is served: the big frames do not fill the budget.
    served = 0
    with RawKafka("127.0.0.1", skiff.port, timeout=60) as normal:
        while any(t.is_alive() for t in threads):
            assert api_versions_ok(normal)
            [entry] = normal.request(METADATA, 9, metadata_request([topic])).topics
            assert entry.error_code == NONE
            served += 1
            time.sleep(0.1)
    for thread in threads:
        thread.join(timeout=300)
    assert answers == {i: MESSAGE_TOO_LARGE for i in range(5)}
    assert served > 0
    peak_kib = _vm_kib(skiff.proc.pid, "VmHWM")
    # The budget lets one 100 MiB frame in at a time; copying a complete frame out of its
    # read buffer holds it twice for a moment.
    grown_mib = (peak_kib - baseline_kib) / 1024
    assert grown_mib < 2 * queued / MiB + 64, f"the sidecar grew by {grown_mib:.0f} MiB"
    # Answered frames are freed at once, not left for the garbage collector.
    wait_for(
        lambda: _vm_kib(skiff.proc.pid, "VmRSS") - baseline_kib < 64 * 1024,
        what="the sidecar's memory back near its baseline",
    )
    samples = scrape(skiff.http_port)
    assert value(samples, "skiff_request_reads_paused_total") >= 1
    wait_for(
        lambda: metric(skiff, "skiff_queued_request_bytes") == 0,
        what="every request's bytes given back",
    )
    assert skiff.alive()


def test_auto_create_per_minute_limit(run_skiff: Callable[..., Skiff]) -> None:
    skiff = run_skiff("--auto-create-topics-per-minute", "3")
    names = [f"auto-{i}" for i in range(5)]
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        entries = kafka.request(METADATA, 9, metadata_request(names)).topics
        codes = {e.name: e.error_code for e in entries}
        assert codes == {
            "auto-0": NONE,
            "auto-1": NONE,
            "auto-2": NONE,
            "auto-3": UNKNOWN_TOPIC_OR_PARTITION,
            "auto-4": UNKNOWN_TOPIC_OR_PARTITION,
        }
        # Produce to an unknown topic is refused the same way; existing topics still work.
        response = kafka.request(PRODUCE, 9, produce_request("auto-5", {0: None}, acks=1))
        assert response.responses[0].partition_responses[0].error_code == (
            UNKNOWN_TOPIC_OR_PARTITION
        )
        entries = kafka.request(METADATA, 9, metadata_request(["auto-0"], False)).topics
        assert entries[0].error_code == NONE
    assert metric(skiff, "skiff_topic_auto_create_refused_total") == 3
    assert "--auto-create-topics-per-minute=3 reached" in skiff.log()


def test_frame_over_the_queued_limit_gets_in_alone(run_skiff: Callable[..., Skiff]) -> None:
    """A frame larger than queued.max.request.bytes is still read (when nothing else is
    queued) and answered; a frame over --max-request-bytes closes its connection."""
    skiff = run_skiff(
        "--queued-max-request-bytes", "65536",
        "--max-request-bytes", str(4 * MiB),
    )  # fmt: skip
    topic = "over-queued"
    size = 2 * MiB
    records = bytearray(size)
    struct.pack_into(">qi", records, 0, 0, size - 12)
    records[16] = 2
    with RawKafka("127.0.0.1", skiff.port) as kafka, RawKafka("127.0.0.1", skiff.port) as small:
        [entry] = kafka.request(METADATA, 9, metadata_request([topic])).topics
        assert entry.error_code == NONE
        for _ in range(3):
            kafka.send_raw(_produce_v3_prefix(kafka, topic, size) + bytes(records))
            assert api_versions_ok(small)
        for _ in range(3):
            response = kafka.recv(PRODUCE, 3, timeout=60)
            assert response.responses[0].partition_responses[0].error_code == MESSAGE_TOO_LARGE
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        kafka.send_raw(struct.pack(">i", 4 * MiB + 1) + b"\x00" * 64)
        assert kafka.closed(timeout=10)
    samples = scrape(skiff.http_port)
    limit = "socket.request.max.bytes"
    assert value(samples, "skiff_request_frames_refused_total", limit=limit) == 1
    wait_for(lambda: metric(skiff, "skiff_queued_request_bytes") == 0, what="no bytes queued")


def test_limits_from_a_kafka_server_properties_file(
    run_skiff: Callable[..., Skiff], tmp_path: Path
) -> None:
    config = tmp_path / "server.properties"
    config.write_text("max.connections=1\nqueued.max.request.bytes=1048576\n")
    skiff = run_skiff("--config", str(config))
    wait_for(lambda: metric(skiff, "skiff_open_connections") == 0, what="no connection open")
    with RawKafka("127.0.0.1", skiff.port) as first, RawKafka("127.0.0.1", skiff.port) as second:
        assert api_versions_ok(first)
        assert second.closed(timeout=10)
    assert metric(skiff, "skiff_connections_rejected_total", limit="max.connections") == 1


def test_clients_under_a_small_queued_bytes_limit_lose_nothing(
    run_skiff: Callable[..., Skiff],
) -> None:
    """With queued.max.request.bytes far below a producer's batches, pipelined Produce
    requests take turns: every record lands once, in order, and reads back."""
    skiff = run_skiff("--queued-max-request-bytes", "16384")
    topic = "small-budget"
    records = [{"value": b"%06d" % i + b"x" * 94} for i in range(20_000)]
    results = confluent_client.produce(skiff.bootstrap, topic, records, linger_ms=20)
    assert [r["offset"] for r in results] == list(range(len(records)))
    got = confluent_client.consume(skiff.bootstrap, topic, 0, 0, len(records))
    assert [r["value"] for r in got] == [r["value"] for r in records]
    # Whether librdkafka had two requests queued at once depends on timing; frames of
    # 20 KB written back to back are read before the first is answered, so the second
    # waits for room, every time.
    batch = build_batch([b"y" * 20_000])
    with RawKafka("127.0.0.1", skiff.port) as kafka:
        frames = b"".join(
            kafka.frame(PRODUCE, 9, produce_request(topic, {0: batch}), cid) for cid in range(4)
        )
        kafka.send_raw(frames)
        bases = [kafka.recv(PRODUCE, 9).responses[0].partition_responses[0] for _ in range(4)]
    assert [(p.error_code, p.base_offset) for p in bases] == [(0, 20_000 + i) for i in range(4)]
    assert metric(skiff, "skiff_request_reads_paused_total") >= 1
    wait_for(lambda: metric(skiff, "skiff_queued_request_bytes") == 0, what="no bytes queued")
