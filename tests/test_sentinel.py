"""Redis Sentinel: Skiff reaches Redis through `redis+sentinel://` and follows a
failover (SENTINEL FAILOVER) while an idempotent acks=all producer runs: the producer
finishes, no acknowledged record is lost or doubled, and the broker registration,
the wake-ups and group coordination continue on the promoted replica."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import redis
from conftest import free_port, start_skiff, stop_process, wait_for_port
from faults_harness import PersistentRedis, ProduceLoop, check_exactly_once
from rawkafka import RawKafka
from test_redis_faults import ENV, PARTITIONS, GroupReader, create_topic

from sidecar.storage.connection import parse_sentinel_url, redact

SERVICE = "mymaster"


def start_sentinel(tmp: Path, primary_port: int) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed"
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    conf = tmp / "sentinel.conf"
    conf.write_text(
        f"port {port}\n"
        "bind 127.0.0.1\n"
        f"dir {tmp}\n"
        f"sentinel monitor {SERVICE} 127.0.0.1 {primary_port} 1\n"
        f"sentinel down-after-milliseconds {SERVICE} 1000\n"
        f"sentinel failover-timeout {SERVICE} 10000\n"
    )
    proc = subprocess.Popen(
        [binary, str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_for_port(port, proc)
    return proc, port


def master_port(sentinel_port: int) -> int:
    addr = redis.Redis(port=sentinel_port).sentinel_get_master_addr_by_name(SERVICE)
    return int(addr[1])


def wait_until(check: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_sentinel_url_parsing() -> None:
    spec = parse_sentinel_url("redis+sentinel://s3cret@h1:26379,h2:26380/mymaster/2")
    assert spec.sentinels == [("h1", 26379), ("h2", 26380)]
    assert (spec.service, spec.db, spec.username, spec.password) == ("mymaster", 2, None, "s3cret")
    spec = parse_sentinel_url(
        "redis+sentinel://app:pw@[::1]:5000/svc?sentinel_password=sp&sentinel_username=su"
    )
    assert spec.sentinels == [("::1", 5000)]
    assert (spec.service, spec.db, spec.username, spec.password) == ("svc", 0, "app", "pw")
    assert spec.sentinel_kwargs == {"password": "sp", "username": "su"}
    assert parse_sentinel_url("redis+sentinel://h1/svc").sentinels == [("h1", 26379)]
    with pytest.raises(ValueError):
        parse_sentinel_url("redis+sentinel://h1:26379")  # no service
    assert redact("redis+sentinel://s3cret@h1:1/m") == "redis+sentinel://***@h1:1/m"


def test_failover_is_followed(tmp_path: Path) -> None:
    primary = PersistentRedis(tmp_path / "primary").start()
    replica = PersistentRedis(
        tmp_path / "replica", extra=("--replicaof", "127.0.0.1", str(primary.port))
    ).start()
    sentinel, sentinel_port = start_sentinel(tmp_path / "sentinel", primary.port)
    server = None
    try:
        wait_until(
            lambda: replica.client().info("replication").get("master_link_status") == "up",
            "the replica did not sync",
        )
        wait_until(
            lambda: redis.Redis(port=sentinel_port).sentinel_master(SERVICE).get("num-slaves") == 1,
            "the sentinel did not discover the replica",
        )
        url = f"redis+sentinel://127.0.0.1:{sentinel_port}/{SERVICE}/0"
        # acks=all waits for the replica (WAIT), so an acknowledged record survives the
        # promotion of that replica.
        server = start_skiff(
            tmp_path / "skiff.log", "--redis-url", url, "--min-insync-replicas", "2", env=ENV
        )
        topic = create_topic(server.bootstrap, PARTITIONS)
        reader = GroupReader(server.bootstrap, topic)
        reader.start()
        loop = ProduceLoop(server.bootstrap, topic, PARTITIONS)
        loop.start()
        loop.wait_acked(3000)
        assert redis.Redis(port=sentinel_port).execute_command("SENTINEL", "FAILOVER", SERVICE)
        wait_until(lambda: master_port(sentinel_port) == replica.port, "no failover happened")
        failed_over_at = loop.acked_count
        # The old primary comes back as a replica of the new one: acks=all can be met.
        loop.wait_acked(failed_over_at + 3000, timeout=120)
        loop.finish()
        check_exactly_once(loop, server.bootstrap)
        reader.finish(loop)
        new_primary = replica.client()
        assert new_primary.info("replication")["role"] == "master"
        for p in range(PARTITIONS):
            assert new_primary.xlen(f"skiff:{{{topic}/{p}}}:log") == len(loop.expected(p))

        # The sidecar's registration (the node id Metadata names now) is renewed on the new
        # primary. An entry of an earlier incarnation (the failover may re-register the
        # sidecar under another id) is left to expire, so only its own is compared.
        def renewed() -> bool:
            with RawKafka("127.0.0.1", server.port) as kafka:
                meta = kafka.request(3, 12, {"topics": [], "allow_auto_topic_creation": False})
            node = str(meta.brokers[0].node_id)

            def expiry() -> int | None:
                raw = new_primary.hget("skiff:brokers", node)
                return None if raw is None else json.loads(raw)["exp"]

            first = expiry()
            time.sleep(1.5)
            last = expiry()
            return first is not None and last is not None and last > first

        wait_until(renewed, "the sidecar's registration was not renewed", timeout=60)
        assert server.alive()
    finally:
        if server is not None:
            stop_process(server.proc)
        stop_process(sentinel)
        replica.stop()
        primary.stop()
