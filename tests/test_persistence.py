"""Data outlives the processes: a Skiff restart against the same Redis, and a restart of
Skiff's own embedded redis-server (AOF in --data-dir)."""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import Skiff, start_redis, start_skiff, stop_process
from rawkafka import (
    RawKafka,
    Rec,
    build_batch,
    fetch_request,
    fetched_records,
    list_offsets_request,
    metadata_request,
    produce_request,
)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, CREATE_TOPICS = 0, 1, 2, 3, 18, 19
NONE = 0
BASE_TS = 1_650_000_000_000


def batches_for(tag: str) -> list[list[Rec]]:
    return [
        [
            Rec(
                f"{tag}-a".encode(),
                b"key-a",
                (("trace", b"1"), ("empty", b""), ("null", None)),
                timestamp=BASE_TS,
            )
        ],
        [
            Rec(None, b"tombstone", timestamp=BASE_TS + 5),
            Rec(b"", None, timestamp=BASE_TS + 2),
            Rec(bytes(range(256)) * 40, b"\x00\xff", timestamp=BASE_TS + 9),
        ],
        [Rec(f"{tag}-{i}".encode(), timestamp=BASE_TS + 100 + i) for i in range(50)],
    ]


def produce_all(
    kafka: RawKafka, topic: str, partition: int, batches: list[list[Rec]], first_offset: int = 0
) -> list[Rec]:
    """Produce each batch; returns the records with the offsets they were given."""
    out: list[Rec] = []
    offset = first_offset
    for records in batches:
        resp = kafka.request(PRODUCE, 9, produce_request(topic, {partition: build_batch(records)}))
        p = resp.responses[0].partition_responses[0]
        assert (p.error_code, p.base_offset) == (NONE, offset)
        out += [replace(r, offset=offset + i) for i, r in enumerate(records)]
        offset += len(records)
    return out


def read_all(kafka: RawKafka, topic: str, partition: int) -> tuple[list[Rec], Any]:
    got: list[Rec] = []
    while True:
        resp = kafka.request(
            FETCH,
            12,
            {
                **fetch_request(topic, {}),
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": partition,
                                "fetch_offset": len(got),
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
            },
        )
        p = resp.responses[0].partitions[0]
        assert p.error_code == NONE
        batch = fetched_records(p.records)
        if not batch:
            return got, p
        got += batch


def state(kafka: RawKafka, topic: str) -> dict[str, Any]:
    meta = kafka.request(METADATA, 12, metadata_request([topic], False))
    [t] = meta.topics
    assert t.error_code == NONE
    ends = {}
    for spec in (-2, -1, -3, BASE_TS + 3):
        resp = kafka.request(
            LIST_OFFSETS,
            8,
            list_offsets_request(topic, {p.partition_index: spec for p in t.partitions}),
        )
        ends[spec] = sorted(
            (p.partition_index, p.offset, p.timestamp) for p in resp.topics[0].partitions
        )
    return {
        "cluster_id": meta.cluster_id,
        "topic_id": t.topic_id,
        "partitions": len(t.partitions),
        "offsets": ends,
    }


def write_sample(port: int) -> tuple[str, dict[int, list[Rec]], dict[str, Any]]:
    topic = f"persist-{uuid.uuid4().hex[:10]}"
    with RawKafka("127.0.0.1", port) as kafka:
        resp = kafka.request(
            CREATE_TOPICS,
            7,
            {
                "topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1}],
                "timeout": 5000,
            },
        )
        assert resp.topics[0].error_code == NONE
        written = {p: produce_all(kafka, topic, p, batches_for(f"p{p}")) for p in (0, 1)}
        for p in (0, 1):
            assert read_all(kafka, topic, p)[0] == written[p]
        return topic, written, state(kafka, topic)


def check_sample(
    port: int, topic: str, written: dict[int, list[Rec]], before: dict[str, Any]
) -> None:
    with RawKafka("127.0.0.1", port) as kafka:
        assert state(kafka, topic) == before
        for p in (0, 1):
            got, last = read_all(kafka, topic, p)
            assert got == written[p]
            assert (last.high_watermark, last.log_start_offset) == (len(written[p]), 0)
        # The next produce continues the offsets.
        more = produce_all(
            kafka,
            topic,
            0,
            [[Rec(b"after restart", timestamp=BASE_TS + 999)]],
            first_offset=len(written[0]),
        )
        assert read_all(kafka, topic, 0)[0] == written[0] + more


def stop_cleanly(server: Skiff, sig: int = signal.SIGTERM) -> None:
    stop_process(server.proc, sig)
    assert server.proc.returncode == 0, server.log()[-3000:]
    assert "stopped" in server.log().splitlines()[-1]


def test_data_survives_a_skiff_restart(tmp_path: Path) -> None:
    redis = start_redis(tmp_path / "redis")
    try:
        first = start_skiff(tmp_path / "first.log", "--redis-url", redis.url)
        try:
            topic, written, before = write_sample(first.port)
        finally:
            stop_cleanly(first)
        second = start_skiff(tmp_path / "second.log", "--redis-url", redis.url)
        try:
            check_sample(second.port, topic, written, before)
        finally:
            stop_cleanly(second)
    finally:
        stop_process(redis.proc)


# -- the embedded redis-server ----------------------------------------------------------------


def redis_servers_of(data_dir: Path) -> list[int]:
    """pids of redis-server processes working in `data_dir` (by cwd or command line)."""
    target = data_dir.resolve()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "redis-server" not in cmdline:
                continue
            status = (entry / "status").read_text()
            if re.search(r"^State:\s+Z", status, re.M):
                continue  # a zombie is not running
            cwd = Path(os.readlink(entry / "cwd"))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if cwd == target or str(target) in cmdline:
            pids.append(int(entry.name))
    return pids


def embedded_pid(server: Skiff) -> int:
    match = re.search(r"started embedded redis-server \(pid (\d+)\)", server.log())
    assert match, server.log()
    return int(match.group(1))


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return True
        if re.search(r"^State:\s+Z", status, re.M):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_data_survives_an_embedded_redis_restart(tmp_path: Path, sig: int) -> None:
    data_dir = tmp_path / "data"
    first = start_skiff(tmp_path / "first.log", "--data-dir", str(data_dir))
    try:
        pid = embedded_pid(first)
        assert redis_servers_of(data_dir) == [pid]
        topic, written, before = write_sample(first.port)
    finally:
        stop_cleanly(first, sig)
    assert wait_gone(pid), f"embedded redis-server {pid} outlived Skiff"
    assert redis_servers_of(data_dir) == []
    assert "stopped embedded redis-server" in first.log()
    assert list(data_dir.glob("appendonlydir/*.aof")), sorted(data_dir.rglob("*"))

    second = start_skiff(tmp_path / "second.log", "--data-dir", str(data_dir))
    try:
        second_pid = embedded_pid(second)
        assert second_pid != pid
        assert redis_servers_of(data_dir) == [second_pid]
        check_sample(second.port, topic, written, before)
    finally:
        stop_cleanly(second, sig)
    assert wait_gone(second_pid)
    assert redis_servers_of(data_dir) == []


def test_embedded_redis_is_private_to_its_data_dir(tmp_path: Path) -> None:
    """Two Skiffs with different data dirs do not see each other's topics."""
    one = start_skiff(tmp_path / "one.log", "--data-dir", str(tmp_path / "one"))
    try:
        two = start_skiff(tmp_path / "two.log", "--data-dir", str(tmp_path / "two"))
        try:
            topic, _, before = write_sample(one.port)
            with RawKafka("127.0.0.1", two.port) as kafka:
                resp = kafka.request(METADATA, 12, metadata_request([topic], False))
                assert resp.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
                assert resp.cluster_id != before["cluster_id"]
        finally:
            stop_cleanly(two)
    finally:
        stop_cleanly(one)
    assert redis_servers_of(tmp_path / "one") == redis_servers_of(tmp_path / "two") == []


def test_hard_killed_skiff_leaves_one_redis_server_per_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = start_skiff(tmp_path / "first.log", "--data-dir", str(data_dir))
    orphan = embedded_pid(first)
    second = None
    try:
        write_sample(first.port)
        stop_process(first.proc, signal.SIGKILL)
        second = start_skiff(tmp_path / "second.log", "--data-dir", str(data_dir))
        assert redis_servers_of(data_dir) == [embedded_pid(second)]
    finally:
        if second is not None:
            stop_process(second.proc)
        if orphan in redis_servers_of(data_dir):
            os.kill(orphan, signal.SIGTERM)
            assert wait_gone(orphan)
